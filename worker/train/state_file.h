// Local safetensors files of f32 tensors (--dump-weights, --save-state,
// --resume-from), written and parsed by the checkpoint library's
// safetensors implementation (checkpoint/safetensors.h), so a weight dump, a
// state file and a checkpoint shard share one format and one code path.
// Thread-safe (no shared state).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/param_layout.h"

namespace athanor {

// Writes `tensors` to `path` (via a temporary file renamed into place).
// Errors: the errno status of the failing file operation; InvalidArgument
// for duplicate or empty tensor names.
absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// Reads an F32-only safetensors file: name -> values. NotFound when the file
// cannot be opened; DataLoss for a malformed file; InvalidArgument for a
// non-F32 tensor. `metadata` may be null.
absl::Status ReadSafetensors(const std::string& path,
                             std::map<std::string, std::vector<float>>* tensors,
                             std::map<std::string, std::string>* metadata = nullptr);

}  // namespace athanor
