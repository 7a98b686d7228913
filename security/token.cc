#include "security/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "common/status.h"

namespace athanor::security {
namespace {

constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;

bool IsHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> RandomHex(size_t n) {
  std::vector<unsigned char> bytes(n);
  if (RAND_bytes(bytes.data(), static_cast<int>(n)) != 1) {
    return absl::InternalError("openssl RAND_bytes failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string HashSecret(const std::string& salt, const std::string& secret) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::string input = salt + secret;
  EVP_Digest(input.data(), input.size(), md, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), len));
}

bool DigestsEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<NewToken> GenerateToken() {
  NewToken t;
  ASSIGN_OR_RETURN(t.id, RandomHex(kIdHex / 2));
  ASSIGN_OR_RETURN(std::string secret, RandomHex(kSecretHex / 2));
  ASSIGN_OR_RETURN(t.salt, RandomHex(16));
  t.token = "ath_" + t.id + "_" + secret;
  t.hash = HashSecret(t.salt, secret);
  return t;
}

absl::StatusOr<ParsedToken> ParseToken(const std::string& token) {
  const size_t want = 4 + kIdHex + 1 + kSecretHex;
  if (token.size() != want || !absl::StartsWith(token, "ath_") || token[4 + kIdHex] != '_') {
    return absl::InvalidArgumentError("not an athanor token (expected ath_<16 hex>_<64 hex>)");
  }
  ParsedToken p{token.substr(4, kIdHex), token.substr(4 + kIdHex + 1)};
  if (!IsHex(p.id) || !IsHex(p.secret)) {
    return absl::InvalidArgumentError("not an athanor token (expected lowercase hex digits)");
  }
  return p;
}

}  // namespace athanor::security
