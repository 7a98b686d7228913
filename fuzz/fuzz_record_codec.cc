// Fuzzes the coordinator's SQLite record codec: the input is one stored
// record's text, decoded as a job and as a node; what decodes must encode
// and decode again, to a record that encodes to the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/store/record_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  using namespace athanor::coord;
  if (auto job = DecodeJob(text); job.ok()) {
    const std::string once = EncodeJob(*job);
    auto again = DecodeJob(once);
    if (!again.ok() || EncodeJob(*again) != once) __builtin_trap();
  }
  if (auto node = DecodeNode(text); node.ok()) {
    const std::string once = EncodeNode(*node);
    auto again = DecodeNode(once);
    if (!again.ok() || EncodeNode(*again) != once) __builtin_trap();
  }
  return 0;
}
