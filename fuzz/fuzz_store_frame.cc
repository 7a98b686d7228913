// Fuzzes the TCP store's frame decoder and Add, as the server and a client
// use them: the input is a byte stream fed in pieces; every decoded request
// runs against an in-memory key space (Set/Get/Add/Check), and replies are
// decoded again as a client would.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "collectives/bootstrap/store_protocol.h"

namespace proto = athanor::store_protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> kv;
  std::string inbox, replies, error;
  size_t pos = 0;
  // The first byte picks the chunk size the bytes arrive in.
  const size_t chunk = size > 0 ? 1 + data[0] % 64 : 1;
  pos = size > 0 ? 1 : 0;
  while (pos < size) {
    size_t n = std::min(chunk, size - pos);
    inbox.append(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    proto::Frame f;
    for (;;) {
      proto::DecodeResult r = proto::Decode(&inbox, &f, &error);
      if (r == proto::DecodeResult::kIncomplete) break;
      if (r == proto::DecodeResult::kInvalid || !proto::IsRequestOp(f.op)) return 0;  // disconnect
      if (f.key.size() > proto::kMaxKeyBytes || f.value.size() > proto::kMaxValueBytes) __builtin_trap();
      if (f.op == proto::kSet) {
        kv[f.key] = f.value;
        replies += proto::Encode(proto::kReply, "", "");
      } else if (f.op == proto::kAdd) {
        auto it = kv.find(f.key);
        std::string sum;
        absl::Status s = proto::ApplyAdd(f.key, it == kv.end() ? nullptr : &it->second, f.value, &sum);
        if (absl::IsInvalidArgument(s)) return 0;  // disconnect
        if (s.ok()) {
          if (sum.size() != 8) __builtin_trap();
          kv[f.key] = sum;
        }
        replies += s.ok() ? proto::Encode(proto::kReply, "", sum) : proto::Encode(proto::kError, "", s.message());
      } else {
        auto it = kv.find(f.key);
        replies += proto::Encode(proto::kReply, "", it == kv.end() ? "" : it->second);
      }
    }
  }
  // The client's side: every reply the server wrote decodes back whole.
  proto::Frame f;
  while (!replies.empty()) {
    if (proto::Decode(&replies, &f, &error) != proto::DecodeResult::kFrame) __builtin_trap();
  }
  return 0;
}
