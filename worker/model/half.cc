#include "worker/model/half.h"

#if defined(ATHANOR_X86_SIMD)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <cstring>

namespace athanor {
const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "fp32";
    case Precision::kBF16:
      return "bf16";
    case Precision::kF16:
      return "fp16";
  }
  return "?";
}

bool ParsePrecision(const std::string& name, Precision* out) {
  if (name == "fp32" || name == "f32")
    *out = Precision::kF32;
  else if (name == "bf16")
    *out = Precision::kBF16;
  else if (name == "fp16" || name == "f16")
    *out = Precision::kF16;
  else
    return false;
  return true;
}

float RoundTo(Precision p, float x) {
  switch (p) {
    case Precision::kF32:
      return x;
    case Precision::kBF16:
      return Bf16ToFloat(FloatToBf16(x));
    case Precision::kF16:
      return F16ToFloat(FloatToF16(x));
  }
  return x;
}

namespace {

// Round-to-nearest-even f32 -> bf16 on the bit pattern; NaN stays NaN.
inline uint32_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u | 0x00400000u) >> 16;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

#if defined(ATHANOR_X86_SIMD)
// F16C and AVX from CPUID leaf 1 (clang's __builtin_cpu_supports does not
// know "f16c"), and the OS saving the YMM registers (OSXSAVE + XCR0).
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    if ((ecx & bit_F16C) == 0 || (ecx & bit_AVX) == 0 || (ecx & bit_OSXSAVE) == 0) return false;
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    return (xcr0_lo & 0x6) == 0x6;
  }();
  return has;
}

// Hardware conversions (round to nearest even, IEEE overflow and subnormals),
// bit-identical to the scalar FloatToF16 / F16ToFloat.
__attribute__((target("avx,f16c"))) void PackF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToF16(in[i]);
}

__attribute__((target("avx,f16c"))) void UnpackF16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = F16ToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void RoundF16c(const float* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = F16ToFloat(FloatToF16(in[i]));
}
#else  // portable build (aarch64, or ATHANOR_SIMD=OFF): the scalar loops only
constexpr bool HasF16c() { return false; }
void PackF16c(const float*, uint16_t*, size_t) {}
void UnpackF16c(const uint16_t*, float*, size_t) {}
void RoundF16c(const float*, float*, size_t) {}
#endif  // ATHANOR_X86_SIMD

}  // namespace

void RoundArray(Precision p, const float* in, float* out, size_t n) {
  switch (p) {
    case Precision::kF32:
      if (in != out) std::memcpy(out, in, n * sizeof(float));
      return;
    case Precision::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = Bf16Bits(in[i]) << 16;
        std::memcpy(out + i, &u, sizeof(u));
      }
      return;
    case Precision::kF16:
      if (HasF16c()) return RoundF16c(in, out, n);
      for (size_t i = 0; i < n; ++i) out[i] = F16ToFloat(FloatToF16(in[i]));
      return;
  }
}

void PackHalf(Precision p, const float* in, uint16_t* out, size_t n) {
  if (p == Precision::kBF16) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(Bf16Bits(in[i]));
  } else if (HasF16c()) {
    PackF16c(in, out, n);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = FloatToF16(in[i]);
  }
}

void UnpackHalf(Precision p, const uint16_t* in, float* out, size_t n) {
  if (p == Precision::kBF16) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
      std::memcpy(out + i, &u, sizeof(u));
    }
  } else if (HasF16c()) {
    UnpackF16c(in, out, n);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = F16ToFloat(in[i]);
  }
}

}  // namespace athanor
