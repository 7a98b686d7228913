// Reduced-precision number formats for mixed-precision compute on CPU.
//
// bf16 and IEEE f16 values are stored as uint16_t bit patterns. Conversions
// from f32 round to nearest, ties to even; f16 overflows to +-inf. "Rounding" an f32 array to a
// format replaces each value with the nearest representable one, still stored as f32, which is how
// the model feeds reduced-precision inputs to f32-accumulating matrix products. Pure functions;
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// Scalar bf16/f16 conversions (FloatToBf16, F16ToFloat, ...) are the
// collectives' own, so gradients round identically on both sides of the wire.
#include "collectives/reduce/reduce_kernels.h"

namespace athanor {

enum class Precision { kF32, kBF16, kF16 };

const char* PrecisionName(Precision p);  // "fp32", "bf16", "fp16"
bool ParsePrecision(const std::string& name, Precision* out);

// Rounds `x` to the nearest value representable in `p` (identity for kF32).
float RoundTo(Precision p, float x);
void RoundArray(Precision p, const float* in, float* out, size_t n);

// Packs f32 to 16-bit bit patterns of `p` (kBF16 or kF16) and back.
void PackHalf(Precision p, const float* in, uint16_t* out, size_t n);
void UnpackHalf(Precision p, const uint16_t* in, float* out, size_t n);

}  // namespace athanor
