#include "checkpoint/training_state.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace athanor {
namespace {

struct DTypeInfo {
  TensorDType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {TensorDType::kF64, "F64", 8}, {TensorDType::kF32, "F32", 4}, {TensorDType::kF16, "F16", 2},
    {TensorDType::kBF16, "BF16", 2}, {TensorDType::kI64, "I64", 8}, {TensorDType::kI32, "I32", 4},
    {TensorDType::kI16, "I16", 2},  {TensorDType::kI8, "I8", 1},   {TensorDType::kU8, "U8", 1},
    {TensorDType::kBool, "BOOL", 1},
};

}  // namespace

std::string DTypeName(TensorDType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

absl::StatusOr<TensorDType> ParseDTypeName(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown tensor dtype '", name, "'"));
}

size_t DTypeSize(TensorDType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

absl::Status ValidateTrainingState(const TrainingState& state) {
  std::set<std::string> names;
  for (const TensorRef& t : state.tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(absl::StrCat("invalid tensor name '", t.name, "'"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", t.name, "'"));
    }
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has a negative dim"));
      elements *= static_cast<uint64_t>(d);
    }
    if (elements * DTypeSize(t.dtype) != t.bytes) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, ": ", t.bytes,
                                                     " bytes do not match its shape and dtype (",
                                                     elements * DTypeSize(t.dtype), ")"));
    }
    if (t.bytes > 0 && t.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has no data"));
    }
    if (t.shard.sharded()) {
      if (t.shape.empty() || t.shard.dim0_offset < 0 ||
          t.shard.dim0_offset + t.shape[0] > t.shard.dim0_total) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, ": shard rows [",
                                                       t.shard.dim0_offset, ", +",
                                                       t.shape.empty() ? 0 : t.shape[0],
                                                       ") outside dim0_total ", t.shard.dim0_total));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace athanor
