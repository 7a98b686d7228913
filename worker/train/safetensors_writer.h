// A minimal safetensors writer for f32 tensors (weight dumps; checkpoint/
// owns the full format with manifests and CRCs).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"name":{"dtype":"F32","shape":[...],"data_offsets":[b,e]},...,
//  "__metadata__":{...}} padded with spaces to a multiple of 8, then the raw
// data. Thread-safe (no shared state).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/param_layout.h"

namespace athanor {

// Writes `tensors` to `path` (via a temporary file renamed into place).
// Errors: the errno status of the failing file operation.
absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// Reads an F32-only safetensors file written by WriteSafetensors (for tests
// and tools): name -> values. InvalidArgument on a malformed file.
// `metadata` may be null.
absl::Status ReadSafetensors(const std::string& path,
                             std::map<std::string, std::vector<float>>* tensors,
                             std::map<std::string, std::string>* metadata = nullptr);

}  // namespace athanor
