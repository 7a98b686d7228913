// Fuzzes the coordinator's SQLite record codec: the input is one stored
// record's text, decoded as a job and as a node; what decodes must encode
// and decode again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/record_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (auto job = athanor::coord::DecodeJob(text); job.ok()) {
    if (!athanor::coord::DecodeJob(athanor::coord::EncodeJob(*job)).ok()) __builtin_trap();
  }
  if (auto node = athanor::coord::DecodeNode(text); node.ok()) {
    if (!athanor::coord::DecodeNode(athanor::coord::EncodeNode(*node)).ok()) __builtin_trap();
  }
  return 0;
}
