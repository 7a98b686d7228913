// The inputs of fuzz_store_frame and its structured seeds, in one place.
//
// An input is a control byte, then a byte stream as one peer of the TCP store
// sends it. The control byte's low 6 bits pick the chunk size the stream
// arrives in (1..64); 0x40 gives the store kFuzzSecret, so the stream must
// first pass the handshake of store_auth.h against kFuzzStoreNonce (fixed so
// that a seed can carry a valid proof); 0x80 also feeds every frame to a
// client's handshake (kFuzzClientNonce), as the answer of an untrusted listener.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "collectives/bootstrap/store_auth.h"
#include "collectives/bootstrap/store_protocol.h"

namespace athanor::fuzz {

constexpr uint8_t kWithSecret = 0x40, kAsClient = 0x80;
inline const std::string kFuzzSecret = "fuzz-rendezvous-secret-0123456789abcdef";
inline const std::string kFuzzStoreNonce(store_auth::kNonceBytes, 'S');
inline const std::string kFuzzClientNonce(store_auth::kNonceBytes, 'C');

// Seed name -> input.
inline std::map<std::string, std::string> StoreFrameSeeds() {
  namespace proto = store_protocol;
  namespace auth = store_auth;
  int64_t one = 1;
  const std::string delta(reinterpret_cast<const char*>(&one), 8);
  const std::string requests = proto::Encode(proto::kSet, "k", "value") + proto::Encode(proto::kGet, "k", "") +
                               proto::Encode(proto::kAdd, "n", delta) + proto::Encode(proto::kAdd, "k", delta) +
                               proto::Encode(proto::kCheck, "k", "") + proto::Encode(proto::kCancel, "k", "");
  const std::string handshake =
      proto::Encode(proto::kHello, auth::kAuthLabel, kFuzzClientNonce) +
      proto::Encode(proto::kProof, "",
                    auth::Mac(kFuzzSecret, auth::Direction::kClientProves, kFuzzClientNonce, kFuzzStoreNonce));
  const std::string challenge = proto::Encode(
      proto::kChallenge, "",
      kFuzzStoreNonce + auth::Mac(kFuzzSecret, auth::Direction::kStoreProves, kFuzzClientNonce, kFuzzStoreNonce));
  return {
      {"set_get_add_check", std::string(1, '\x07') + requests},
      {"handshake_then_requests", std::string(1, static_cast<char>(kWithSecret | 7)) + handshake + requests},
      {"request_without_handshake", std::string(1, static_cast<char>(kWithSecret | 5)) + requests},
      {"challenge_to_client", std::string(1, static_cast<char>(kAsClient | 3)) + challenge +
                                  proto::Encode(proto::kDenied, auth::kDeniedNoSecret, "")},
  };
}

}  // namespace athanor::fuzz
