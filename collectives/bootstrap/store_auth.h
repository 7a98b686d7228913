// The TCP store's mutual proof of the rendezvous secret: the store and each
// client show each other that they know the attempt's secret without either
// sending it, so a process that squats on the store's port learns nothing
// from the ranks that connect to it (see docs/security.md, "Rendezvous
// secret"). The exchange, in store_protocol.h frames:
//
//   client -> store   'H'  key kAuthLabel, value: client nonce Nc (32 bytes)
//   store  -> client  'N'  value: store nonce Ns (32) + MAC(kStoreProves, Nc, Ns) (32)
//   client -> store   'P'  value: MAC(kClientProves, Nc, Ns) (32)
//   store  -> client  'R'  admitted; or 'D' (key: why) and the store hangs up
//
// MAC(direction, Nc, Ns) = HMAC-SHA256(secret, label(direction) || Nc || Ns):
// both fresh nonces bind a proof to its connection (no replay) and the
// direction label keeps a store's proof from passing as a client's (no
// reflection). The store proves first, so a client sends nothing derived from
// the secret until the listener has shown that it knows the secret. Every
// length is checked exactly. It authenticates the two ends, not the bytes
// after it: there is no encryption, and a proxy that can reach the real store
// can still relay a whole connection.
//
// Pure (no sockets, nonces passed in) so that it can be tested and fuzzed;
// each handshake object belongs to one connection and one thread.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/bootstrap/store_protocol.h"

namespace athanor::store_auth {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
// The hello's key: names this version of the exchange (a client of an older
// build presented its secret in the value of an unlabelled hello).
constexpr absl::string_view kAuthLabel = "athanor-store-auth-v2";

// Why a store refused a peer, sent as the key of its 'D' frame. The client
// maps these to its own messages and never quotes a listener's text.
constexpr absl::string_view kDeniedNoSecret = "store-has-no-secret";
constexpr absl::string_view kDeniedSecretRequired = "secret-required";
constexpr absl::string_view kDeniedBadHello = "bad-hello";
constexpr absl::string_view kDeniedBadProof = "bad-proof";

enum class Direction { kStoreProves, kClientProves };

// kNonceBytes from OpenSSL's CSPRNG; Internal when it has no entropy.
absl::StatusOr<std::string> NewNonce();

// HMAC-SHA256(secret, label(direction) || client_nonce || server_nonce).
std::string Mac(absl::string_view secret, Direction direction, absl::string_view client_nonce,
                absl::string_view server_nonce);

// The store's side of one connection.
class StoreHandshake {
 public:
  enum class Outcome { kContinue, kAdmitted, kRefused };

  // `secret` is non-empty; `store_nonce` has kNonceBytes fresh bytes.
  StoreHandshake(std::string secret, std::string store_nonce);

  // Takes the peer's next frame and appends the frame to send back to
  // `reply`. kRefused sets `reason` (one line for the log) and the peer is to
  // be disconnected after the reply; kAdmitted: later frames are requests.
  Outcome OnFrame(const store_protocol::Frame& frame, std::string* reply, std::string* reason);

 private:
  Outcome Refuse(absl::string_view why_key, std::string why, std::string* reply,
                 std::string* reason);

  const std::string secret_;
  const std::string store_nonce_;
  std::string client_nonce_;  // empty until the hello
};

// The client's side of one connection.
class ClientHandshake {
 public:
  // `secret` is non-empty; `client_nonce` has kNonceBytes fresh bytes.
  ClientHandshake(std::string secret, std::string client_nonce);

  // The first frame to send.
  std::string Hello() const;

  // Takes the listener's answer to Hello and returns the proof frame to send,
  // or PermissionDenied saying why the listener is not trusted (a sentence
  // without the address, for the caller to prefix). Nothing derived from the
  // secret leaves this object before the listener's proof checks out.
  absl::StatusOr<std::string> OnChallenge(const store_protocol::Frame& frame) const;

 private:
  const std::string secret_;
  const std::string client_nonce_;
};

}  // namespace athanor::store_auth
