// Safetensors shards: the on-store format of one rank's checkpoint.
//
//   [u64 little-endian N][N bytes of JSON header, space-padded so that 8+N is a
//   multiple of 8][tensor bytes, contiguous, in header order]
//
// The header maps each tensor name to {"dtype","shape","data_offsets":[b,e]}
// (offsets relative to the first byte after the header) and holds a
// "__metadata__" string->string map. Any safetensors reader opens these files.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/training_state.h"

namespace athanor {

struct SafetensorsEntry {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // relative to data_start
  uint64_t end = 0;
};

struct SafetensorsLayout {
  std::string header;        // the length prefix, the JSON and its padding
  uint64_t data_start = 0;   // == header.size()
  uint64_t total_size = 0;   // the whole file
  std::vector<SafetensorsEntry> entries;  // in `state.tensors` order
  std::map<std::string, std::string> metadata;
};

// Lays out `tensors` (contiguously, in order) with `metadata`.
absl::StatusOr<SafetensorsLayout> PlanSafetensors(const std::vector<TensorRef>& tensors,
                                                  const std::map<std::string, std::string>& metadata);

// The header length the first 8 bytes announce (DataLoss past `max_header`).
absl::StatusOr<uint64_t> SafetensorsHeaderLength(absl::string_view first8,
                                                 uint64_t max_header = 100 << 20);

// Parses a header: `bytes` holds at least the first 8+N bytes of the file and
// `file_size` is its size (offsets are checked against it). DataLoss with a
// reason for anything malformed: dims past INT64_MAX, element counts past 64
// bits, ranges that disagree with shape x dtype or overlap each other.
// Entries come back sorted by offset.
absl::StatusOr<SafetensorsLayout> ParseSafetensors(absl::string_view bytes, uint64_t file_size);

}  // namespace athanor
