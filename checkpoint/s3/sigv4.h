// AWS Signature Version 4 for S3 requests, with OpenSSL's SHA-256 and HMAC.
//
// Canonical request: METHOD, the URI-encoded path ('/' kept), the query
// sorted by encoded key with keys and values URI-encoded (RFC 3986 unreserved
// characters kept), the signed headers lower-cased, trimmed and sorted, their
// names joined by ';', and the payload hash. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace athanor::sigv4 {

struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string region;
  std::string service = "s3";
};

std::string HexSha256(absl::string_view data);
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// Percent-encodes everything but A-Z a-z 0-9 - _ . ~ (and '/' when keep_slash).
std::string UriEncode(absl::string_view in, bool keep_slash);

// "20130524T000000Z" for a Unix time.
std::string AmzDate(int64_t unix_seconds);

// The Authorization header value. `headers` are the headers to sign (names in
// any case; must include host and x-amz-date); `path` is the unencoded path;
// `query` is unencoded.
std::string Authorization(const Credentials& creds, const std::string& method,
                          const std::string& path, const std::map<std::string, std::string>& query,
                          const std::map<std::string, std::string>& headers,
                          const std::string& payload_sha256, const std::string& amz_date);

}  // namespace athanor::sigv4
