#include "collectives/reduce/element_values.h"

#include <algorithm>
#include <cstdint>

#include "collectives/reduce/reduce_kernels.h"

namespace athanor {

void StoreElement(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kF32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::kF16: static_cast<uint16_t*>(buf)[i] = FloatToF16(static_cast<float>(v)); return;
    case DataType::kBF16: static_cast<uint16_t*>(buf)[i] = FloatToBf16(static_cast<float>(v)); return;
    case DataType::kI32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); return;
    case DataType::kI64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); return;
  }
}

double LoadElement(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kF32: return static_cast<const float*>(buf)[i];
    case DataType::kF16: return F16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kI32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kI64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

double ExactReduction(DataType t, ReduceOp op, int world,
                      const std::function<double(int rank)>& input) {
  double sum = 0, hi = 0, lo = 0;
  for (int r = 0; r < world; ++r) {
    double v = input(r);
    sum += v;
    hi = r == 0 ? v : std::max(hi, v);
    lo = r == 0 ? v : std::min(lo, v);
  }
  switch (op) {
    case ReduceOp::kSum: return sum;
    case ReduceOp::kMax: return hi;
    case ReduceOp::kMin: return lo;
    case ReduceOp::kAvg: break;
  }
  if (t == DataType::kI32 || t == DataType::kI64) {
    return static_cast<double>(static_cast<int64_t>(sum) / world);
  }
  // The sum is exact in every float type; the division rounds once to the type.
  char cell[8];
  StoreElement(t, cell, 0, static_cast<double>(static_cast<float>(sum) / static_cast<float>(world)));
  return LoadElement(t, cell, 0);
}

}  // namespace athanor
