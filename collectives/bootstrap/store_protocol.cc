#include "collectives/bootstrap/store_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace athanor::store_protocol {
namespace {

uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void AppendU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string Encode(char op, absl::string_view key, absl::string_view value) {
  std::string out;
  out.reserve(kHeaderBytes + key.size() + value.size());
  out.push_back(op);
  AppendU32(static_cast<uint32_t>(key.size()), &out);
  out.append(key.data(), key.size());
  AppendU32(static_cast<uint32_t>(value.size()), &out);
  out.append(value.data(), value.size());
  return out;
}

DecodeResult Decode(std::string* buf, Frame* frame, std::string* error) {
  if (buf->size() < 5) return DecodeResult::kIncomplete;
  const size_t klen = LoadU32(buf->data() + 1);
  if (klen > kMaxKeyBytes) {
    *error = absl::StrCat("key length ", klen, " is over the limit of ", kMaxKeyBytes);
    return DecodeResult::kInvalid;
  }
  if (buf->size() < kHeaderBytes + klen) return DecodeResult::kIncomplete;
  const size_t vlen = LoadU32(buf->data() + 5 + klen);
  if (vlen > kMaxValueBytes) {
    *error = absl::StrCat("value length ", vlen, " is over the limit of ", kMaxValueBytes);
    return DecodeResult::kInvalid;
  }
  const size_t total = kHeaderBytes + klen + vlen;  // size_t: no wrap with the caps above
  if (buf->size() < total) return DecodeResult::kIncomplete;
  frame->op = (*buf)[0];
  frame->key.assign(buf->data() + 5, klen);
  frame->value.assign(buf->data() + kHeaderBytes + klen, vlen);
  buf->erase(0, total);
  return DecodeResult::kFrame;
}

bool IsRequestOp(char op) {
  return op == kSet || op == kGet || op == kAdd || op == kCheck || op == kCancel || op == kHello;
}

absl::Status ApplyAdd(absl::string_view key, const std::string* current, absl::string_view delta,
                      std::string* result) {
  if (delta.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat("Add on '", key, "' carries a ", delta.size(),
                                                   "-byte delta, not 8 bytes"));
  }
  if (current != nullptr && current->size() != 8) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Add on '", key, "': its value has ", current->size(), " bytes, not an 8-byte counter"));
  }
  uint64_t a = 0, d = 0;
  if (current != nullptr) std::memcpy(&a, current->data(), 8);
  std::memcpy(&d, delta.data(), 8);
  const uint64_t sum = a + d;  // two's complement wrap, as int64 addition would without UB
  result->assign(reinterpret_cast<const char*>(&sum), 8);
  return absl::OkStatus();
}

}  // namespace athanor::store_protocol
