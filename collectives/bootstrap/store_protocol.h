// The TCP store's wire format and the server's per-key operations, apart from
// any socket so that they can be tested and fuzzed on bytes alone.
//
// A frame, both ways: op (1 byte), key length (u32 little-endian), key, value
// length (u32), value. Replies use op 'R' (or 'E' with an error message as the
// value) and an empty key. Lengths are capped (kMaxKeyBytes, kMaxValueBytes)
// before anything is buffered, so one peer cannot make rank 0 hold gigabytes;
// a frame that breaks the format is a protocol error and its peer is
// disconnected. The handshake that proves the rendezvous secret ('H', 'N',
// 'P', 'D') is in store_auth.h. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace athanor::store_protocol {

constexpr char kSet = 'S', kGet = 'G', kAdd = 'A', kCheck = 'C', kCancel = 'X', kHello = 'H';
constexpr char kReply = 'R', kCancelled = 'Z', kError = 'E';
// The handshake's: the store's challenge, the client's proof, a refusal.
constexpr char kChallenge = 'N', kProof = 'P', kDenied = 'D';

constexpr size_t kHeaderBytes = 9;  // op + two u32 lengths
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{64} << 20;

struct Frame {
  char op = 0;
  std::string key;
  std::string value;
};

enum class DecodeResult { kFrame, kIncomplete, kInvalid };

std::string Encode(char op, absl::string_view key, absl::string_view value);

// Takes one frame from the front of `buf`. kIncomplete leaves `buf` as it
// is; kInvalid (a length past its cap) sets `error` and leaves `buf`
// unspecified: the connection cannot be resynchronised.
DecodeResult Decode(std::string* buf, Frame* frame, std::string* error);

// True for the ops a client may send.
bool IsRequestOp(char op);

// Add: `current` (null when the key is absent) plus the 8-byte delta in
// `delta`. InvalidArgument when the delta is not 8 bytes (a protocol error);
// FailedPrecondition naming the key when the stored value is not 8 bytes.
absl::Status ApplyAdd(absl::string_view key, const std::string* current, absl::string_view delta,
                      std::string* result);

}  // namespace athanor::store_protocol
