// TrainingState: what a rank hands to the checkpointer, described generically
// so this library never learns the model: named tensors plus a string map.
//
// Tensors are raw host bytes. A tensor is either replicated (every rank holds
// all of it: parameters under data parallelism) or sharded along dim 0 (a
// rank holds rows [dim0_offset, dim0_offset + shape[0]) of a tensor with
// dim0_total rows: ZeRO-style optimizer state). Restore uses this to load a
// checkpoint written by N ranks into M ranks.
//
// Metadata keys chosen by the caller (e.g. "rng_state", "data_cursor",
// "loss_scale") are stored verbatim; "step", "rank" and "world_size" are set by
// the checkpointer and override caller values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace athanor {

enum class TensorDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// Safetensors names: "F32", "BF16", "I64", "BOOL"...
std::string DTypeName(TensorDType dtype);
absl::StatusOr<TensorDType> ParseDTypeName(absl::string_view name);
size_t DTypeSize(TensorDType dtype);

struct ShardSpec {
  int64_t dim0_offset = 0;
  int64_t dim0_total = -1;  // < 0: replicated
  bool sharded() const { return dim0_total >= 0; }
};

// A tensor to save (data is read) or to restore into (data is written).
// The caller owns the memory, which must stay valid for the call.
struct TensorRef {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;  // this rank's local shape
  void* data = nullptr;
  size_t bytes = 0;            // == product(shape) * DTypeSize(dtype)
  ShardSpec shard;
};

struct TrainingState {
  std::vector<TensorRef> tensors;
  std::map<std::string, std::string> metadata;
};

// Checks names are unique and non-empty, bytes match shapes, and shard specs
// are in range. InvalidArgument naming the tensor otherwise.
absl::Status ValidateTrainingState(const TrainingState& state);

}  // namespace athanor
