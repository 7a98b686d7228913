// Element-wise reduce kernels for every DataType, on host memory.
//
// f16 and bf16 are widened to f32, combined, and rounded back with
// round-to-nearest-even (NaN stays NaN). Loops are written so GCC -O3
// vectorises them; bf16 uses AVX2 and f16 AVX2+F16C when the CPU has them
// (checked once at run time), with portable loops otherwise.
// Pure functions, thread-safe. `dst` may alias `a` or `b` exactly (not partially).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/communicator.h"

namespace athanor {

// dst[i] = a[i] (op) b[i]; kAvg combines like kSum (divide later with ScaleForAvg).
void ReduceBuffers(DataType type, ReduceOp op, void* dst, const void* a, const void* b,
                   size_t count);

// buf[i] /= divisor (integer division for i32/i64), for kAvg after the sum.
void ScaleForAvg(DataType type, void* buf, size_t count, int divisor);

// Scalar conversions, exposed for tests and for callers that build inputs.
float Bf16ToFloat(uint16_t h);
uint16_t FloatToBf16(float f);
float F16ToFloat(uint16_t h);
uint16_t FloatToF16(float f);

}  // namespace athanor
