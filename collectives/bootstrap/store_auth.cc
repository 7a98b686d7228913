#include "collectives/bootstrap/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/str_cat.h"

namespace athanor::store_auth {
namespace {

namespace proto = store_protocol;

// Fixed-length labels, so label || Nc || Ns parses one way only.
constexpr absl::string_view kStoreLabel = "athanor-store-auth-v2 store->client";
constexpr absl::string_view kClientLabel = "athanor-store-auth-v2 client->store";
static_assert(kStoreLabel.size() == kClientLabel.size());

bool SameMac(absl::string_view a, absl::string_view b) {
  return a.size() == kMacBytes && b.size() == kMacBytes && CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0;
}

// What the client tells its caller, for each refusal a listener may claim.
// The listener is not trusted yet: its words are mapped, never quoted.
std::string DeniedMeaning(absl::string_view key) {
  if (key == kDeniedNoSecret) {
    return "the listener says it was started without a rendezvous secret, while this rank has one";
  }
  if (key == kDeniedBadHello) return "the listener refused this rank's hello (a store of another build?)";
  return "the listener refused the handshake before proving anything";
}

}  // namespace

absl::StatusOr<std::string> NewNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return absl::InternalError("TCP store: OpenSSL's RAND_bytes could not make a nonce");
  }
  return nonce;
}

std::string Mac(absl::string_view secret, Direction direction, absl::string_view client_nonce,
                absl::string_view server_nonce) {
  const absl::string_view label = direction == Direction::kStoreProves ? kStoreLabel : kClientLabel;
  const std::string input = absl::StrCat(label, client_nonce, server_nonce);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

StoreHandshake::StoreHandshake(std::string secret, std::string store_nonce)
    : secret_(std::move(secret)), store_nonce_(std::move(store_nonce)) {}

StoreHandshake::Outcome StoreHandshake::Refuse(absl::string_view why_key, std::string why,
                                               std::string* reply, std::string* reason) {
  reply->append(proto::Encode(proto::kDenied, why_key, ""));
  *reason = std::move(why);
  return Outcome::kRefused;
}

StoreHandshake::Outcome StoreHandshake::OnFrame(const proto::Frame& frame, std::string* reply,
                                                std::string* reason) {
  if (client_nonce_.empty()) {
    if (frame.op != proto::kHello) {
      return Refuse(kDeniedSecretRequired,
                    "it sent a request without proving the rendezvous secret (a client without "
                    "ATHANOR_RENDEZVOUS_SECRET?)",
                    reply, reason);
    }
    if (frame.key != kAuthLabel || frame.value.size() != kNonceBytes) {
      return Refuse(kDeniedBadHello,
                    absl::StrCat("its hello is not a ", kAuthLabel, " challenge (key of ",
                                 frame.key.size(), " bytes, value of ", frame.value.size(),
                                 " bytes; an older client that sends its secret?)"),
                    reply, reason);
    }
    client_nonce_ = frame.value;
    reply->append(proto::Encode(
        proto::kChallenge, "",
        absl::StrCat(store_nonce_, Mac(secret_, Direction::kStoreProves, client_nonce_, store_nonce_))));
    return Outcome::kContinue;
  }
  if (frame.op != proto::kProof || frame.value.size() != kMacBytes) {
    return Refuse(kDeniedBadProof,
                  absl::StrCat("it answered the challenge with op 0x",
                               absl::Hex(static_cast<unsigned char>(frame.op)), " and ",
                               frame.value.size(), " bytes, not a proof"),
                  reply, reason);
  }
  if (!SameMac(frame.value, Mac(secret_, Direction::kClientProves, client_nonce_, store_nonce_))) {
    return Refuse(kDeniedBadProof,
                  "its proof does not match this attempt's rendezvous secret (a rank of another "
                  "attempt, or another tenant's process?)",
                  reply, reason);
  }
  reply->append(proto::Encode(proto::kReply, "", ""));
  return Outcome::kAdmitted;
}

ClientHandshake::ClientHandshake(std::string secret, std::string client_nonce)
    : secret_(std::move(secret)), client_nonce_(std::move(client_nonce)) {}

std::string ClientHandshake::Hello() const {
  return proto::Encode(proto::kHello, kAuthLabel, client_nonce_);
}

absl::StatusOr<std::string> ClientHandshake::OnChallenge(const proto::Frame& frame) const {
  if (frame.op == proto::kDenied) return absl::PermissionDeniedError(DeniedMeaning(frame.key));
  if (frame.op != proto::kChallenge || !frame.key.empty() ||
      frame.value.size() != kNonceBytes + kMacBytes) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the listener answered the challenge with op 0x", absl::Hex(static_cast<unsigned char>(frame.op)),
        " and ", frame.value.size(), " bytes, not with a proof"));
  }
  const absl::string_view store_nonce = absl::string_view(frame.value).substr(0, kNonceBytes);
  const absl::string_view store_mac = absl::string_view(frame.value).substr(kNonceBytes);
  if (!SameMac(store_mac, Mac(secret_, Direction::kStoreProves, client_nonce_, store_nonce))) {
    return absl::PermissionDeniedError("the listener's proof does not match");
  }
  return proto::Encode(proto::kProof, "", Mac(secret_, Direction::kClientProves, client_nonce_, store_nonce));
}

}  // namespace athanor::store_auth
