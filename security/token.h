// Bearer tokens: "ath_<id>_<secret>" (id: 16 hex digits, secret: 64). The id
// finds the token's record; only a salted SHA-256 of the secret is kept, and
// it is compared in constant time. Pure functions over OpenSSL's RNG and
// digests; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace athanor::security {

struct NewToken {
  std::string id;
  std::string token;  // the whole bearer token: shown once, never stored
  std::string salt;   // hex
  std::string hash;   // hex SHA-256(salt || secret)
};

absl::StatusOr<NewToken> GenerateToken();

struct ParsedToken {
  std::string id;
  std::string secret;
};
// InvalidArgument (without echoing the token) when it is not of the form above.
absl::StatusOr<ParsedToken> ParseToken(const std::string& token);

// Hex SHA-256 of salt || secret.
std::string HashSecret(const std::string& salt, const std::string& secret);
// Constant-time equality of two hex digests.
bool DigestsEqual(const std::string& a, const std::string& b);

// `n` random bytes as 2n hex digits (OpenSSL's RAND_bytes).
absl::StatusOr<std::string> RandomHex(size_t n);

}  // namespace athanor::security
