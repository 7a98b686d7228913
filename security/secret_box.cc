#include "security/secret_box.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "security/private_file.h"
#include "security/token.h"

namespace athanor::security {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kMaxSecretBytes = 64 << 10;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

const unsigned char* U(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

absl::StatusOr<SecretBox> SecretBox::FromKeyFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path));
  std::string hex = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (hex.size() != 2 * kKeyBytes || !IsLowerHex(hex)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a key of 64 hex digits"));
  }
  return SecretBox(absl::HexStringToBytes(hex));
}

absl::Status SecretBox::CreateKeyFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string hex, RandomHex(kKeyBytes));
  return WritePrivateFile(path, hex + "\n");
}

absl::StatusOr<std::string> SecretBox::Seal(const std::string& plaintext, const std::string& aad) const {
  if (plaintext.size() > kMaxSecretBytes) return absl::InvalidArgumentError("secret larger than 64 KiB");
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    return absl::InternalError("openssl RAND_bytes failed");
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  std::string out(plaintext.size(), '\0');
  int n = 0, m = 0;
  std::string tag(kTagBytes, '\0');
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key_), U(nonce)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &n, U(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + n, &m) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag.data()) != 1) {
    return absl::InternalError("openssl AES-256-GCM encryption failed");
  }
  return absl::BytesToHexString(nonce + out + tag);
}

absl::StatusOr<std::string> SecretBox::Open(const std::string& sealed, const std::string& aad) const {
  if (sealed.size() < 2 * (kNonceBytes + kTagBytes) || sealed.size() % 2 != 0 || !IsLowerHex(sealed) ||
      sealed.size() > 2 * (kMaxSecretBytes + kNonceBytes + kTagBytes)) {
    return absl::DataLossError("sealed secret: malformed");
  }
  std::string raw = absl::HexStringToBytes(sealed);
  std::string nonce = raw.substr(0, kNonceBytes);
  std::string tag = raw.substr(raw.size() - kTagBytes);
  std::string body = raw.substr(kNonceBytes, raw.size() - kNonceBytes - kTagBytes);
  Ctx ctx(EVP_CIPHER_CTX_new());
  std::string out(body.size(), '\0');
  int n = 0, m = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key_), U(nonce)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &n, U(body),
                        static_cast<int>(body.size())) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + n, &m) != 1) {
    return absl::DataLossError("sealed secret: does not open under this key (altered, or another key or owner)");
  }
  out.resize(static_cast<size_t>(n + m));
  return out;
}

}  // namespace athanor::security
