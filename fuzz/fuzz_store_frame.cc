// Fuzzes the TCP store's frame decoder, its handshake and Add, as the server
// and a client use them: the input is a control byte and a byte stream fed in
// pieces (see store_frame_seeds.h). With a secret, frames first go through
// the store's side of the handshake until it admits or refuses the peer;
// then every decoded request runs against an in-memory key space
// (Set/Get/Add/Check). Optionally every frame is also given to a client's
// handshake as a listener's answer. Replies are decoded again as a client
// would.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "collectives/bootstrap/store_auth.h"
#include "collectives/bootstrap/store_protocol.h"
#include "fuzz/store_frame_seeds.h"

namespace proto = athanor::store_protocol;
namespace auth = athanor::store_auth;
namespace fz = athanor::fuzz;

namespace {

// Serves the frames of `inbox` as the server does; false once the peer is
// to be disconnected.
bool Serve(std::string* inbox, std::optional<auth::StoreHandshake>* handshake, const auth::ClientHandshake* client,
           std::map<std::string, std::string>* kv, std::string* replies) {
  std::string error;
  proto::Frame f;
  for (;;) {
    proto::DecodeResult r = proto::Decode(inbox, &f, &error);
    if (r == proto::DecodeResult::kIncomplete) return true;
    if (r == proto::DecodeResult::kInvalid) return false;
    if (f.key.size() > proto::kMaxKeyBytes || f.value.size() > proto::kMaxValueBytes) __builtin_trap();
    if (client != nullptr) {
      absl::StatusOr<std::string> proof = client->OnChallenge(f);
      if (proof.ok() && proof->size() != proto::kHeaderBytes + auth::kMacBytes) __builtin_trap();
      if (!proof.ok() && !absl::IsPermissionDenied(proof.status())) __builtin_trap();
    }
    if (handshake->has_value()) {
      std::string why;
      auto outcome = (*handshake)->OnFrame(f, replies, &why);
      if (outcome == auth::StoreHandshake::Outcome::kRefused) {
        if (why.empty()) __builtin_trap();
        return false;
      }
      if (outcome == auth::StoreHandshake::Outcome::kAdmitted) handshake->reset();
      continue;
    }
    if (!proto::IsRequestOp(f.op) || f.op == proto::kHello) return false;  // as the server: disconnect
    if (f.op == proto::kSet) {
      (*kv)[f.key] = f.value;
      *replies += proto::Encode(proto::kReply, "", "");
    } else if (f.op == proto::kAdd) {
      auto it = kv->find(f.key);
      std::string sum;
      absl::Status s = proto::ApplyAdd(f.key, it == kv->end() ? nullptr : &it->second, f.value, &sum);
      if (absl::IsInvalidArgument(s)) return false;
      if (s.ok()) {
        if (sum.size() != 8) __builtin_trap();
        (*kv)[f.key] = sum;
      }
      *replies += s.ok() ? proto::Encode(proto::kReply, "", sum) : proto::Encode(proto::kError, "", s.message());
    } else {
      auto it = kv->find(f.key);
      *replies += proto::Encode(proto::kReply, "", it == kv->end() ? "" : it->second);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  std::optional<auth::StoreHandshake> handshake;
  if (data[0] & fz::kWithSecret) handshake.emplace(fz::kFuzzSecret, fz::kFuzzStoreNonce);
  const auth::ClientHandshake client(fz::kFuzzSecret, fz::kFuzzClientNonce);
  std::map<std::string, std::string> kv;
  std::string inbox, replies;
  for (size_t pos = 1; pos < size;) {
    size_t n = std::min(chunk, size - pos);
    inbox.append(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    if (!Serve(&inbox, &handshake, (data[0] & fz::kAsClient) ? &client : nullptr, &kv, &replies)) break;
  }
  // The client's side: every reply the server wrote decodes back whole.
  proto::Frame f;
  std::string error;
  while (!replies.empty()) {
    if (proto::Decode(&replies, &f, &error) != proto::DecodeResult::kFrame) __builtin_trap();
  }
  return 0;
}
