// Fuzzes the coordinator's state database rows: the input is one stored row's
// text, decoded as a job and as a node, in the current format
// (record_codec.h) and in the old one (legacy_rows.h); what decodes must
// encode and decode again, to a record that encodes to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "coordinator/store/legacy_rows.h"
#include "coordinator/store/record_codec.h"

namespace {

using namespace athanor::coord;

template <typename Record>
void RoundTrip(const absl::StatusOr<Record>& record) {
  if (!record.ok()) return;
  std::string once;
  if constexpr (std::is_same_v<Record, JobRecord>) {
    once = EncodeJob(*record);
    auto again = DecodeJob(once);
    if (!again.ok() || EncodeJob(*again) != once) __builtin_trap();
  } else {
    once = EncodeNode(*record);
    auto again = DecodeNode(once);
    if (!again.ok() || EncodeNode(*again) != once) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  RoundTrip(DecodeJob(text));
  RoundTrip(DecodeNode(text));
  RoundTrip(DecodeLegacyJob(text));
  RoundTrip(DecodeLegacyNode(text));
  return 0;
}
