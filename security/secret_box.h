// Authenticated encryption of small secrets at rest: AES-256-GCM (OpenSSL
// EVP) under a 32-byte key read from a key file (64 hex digits, mode 0600).
// A sealed value is hex(nonce[12] || ciphertext || tag[16]) with a fresh
// random nonce; `aad` binds it to its owner (e.g. the tenant), so a sealed
// value moved to another row does not open. Thread-safe (immutable).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace athanor::security {

class SecretBox {
 public:
  // PermissionDenied for a key file others may read; InvalidArgument when it
  // does not hold 64 hex digits.
  static absl::StatusOr<SecretBox> FromKeyFile(const std::string& path);
  // Writes a fresh key to `path` (0600, never overwriting).
  static absl::Status CreateKeyFile(const std::string& path);

  absl::StatusOr<std::string> Seal(const std::string& plaintext, const std::string& aad) const;
  // DataLoss when `sealed` is malformed, was sealed under another key or aad,
  // or was altered.
  absl::StatusOr<std::string> Open(const std::string& sealed, const std::string& aad) const;

 private:
  explicit SecretBox(std::string key) : key_(std::move(key)) {}
  std::string key_;  // 32 raw bytes
};

}  // namespace athanor::security
