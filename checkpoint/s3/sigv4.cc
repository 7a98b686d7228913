#include "checkpoint/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace athanor::sigv4 {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

std::string HexSha256(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof(digest));
}

std::string UriEncode(absl::string_view in, bool keep_slash) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    }
  }
  return out;
}

std::string AmzDate(int64_t unix_seconds) {
  return absl::FormatTime("%Y%m%dT%H%M%SZ", absl::FromUnixSeconds(unix_seconds), absl::UTCTimeZone());
}

std::string Authorization(const Credentials& creds, const std::string& method,
                          const std::string& path, const std::map<std::string, std::string>& query,
                          const std::map<std::string, std::string>& headers,
                          const std::string& payload_sha256, const std::string& amz_date) {
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : query) q.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(q.begin(), q.end());
  std::vector<std::string> q_parts;
  for (const auto& [k, v] : q) q_parts.push_back(absl::StrCat(k, "=", v));

  std::map<std::string, std::string> h;
  for (const auto& [k, v] : headers) {
    h[absl::AsciiStrToLower(k)] = std::string(absl::StripAsciiWhitespace(v));
  }
  std::string canonical_headers;
  std::vector<std::string> names;
  for (const auto& [k, v] : h) {
    absl::StrAppend(&canonical_headers, k, ":", v, "\n");
    names.push_back(k);
  }
  std::string signed_headers = absl::StrJoin(names, ";");
  std::string canonical = absl::StrCat(method, "\n", UriEncode(path.empty() ? "/" : path, true), "\n",
                                       absl::StrJoin(q_parts, "&"), "\n", canonical_headers, "\n",
                                       signed_headers, "\n", payload_sha256);
  std::string date = amz_date.substr(0, 8);
  std::string scope = absl::StrCat(date, "/", creds.region, "/", creds.service, "/aws4_request");
  std::string to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n", HexSha256(canonical));
  std::string key = Hmac(absl::StrCat("AWS4", creds.secret_key), date);
  key = Hmac(key, creds.region);
  key = Hmac(key, creds.service);
  key = Hmac(key, "aws4_request");
  std::string sig = Hmac(key, to_sign);
  return absl::StrCat("AWS4-HMAC-SHA256 Credential=", creds.access_key, "/", scope,
                      ",SignedHeaders=", signed_headers,
                      ",Signature=", Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size()));
}

}  // namespace athanor::sigv4
