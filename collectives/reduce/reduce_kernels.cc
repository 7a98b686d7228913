#include "collectives/reduce/reduce_kernels.h"

// ATHANOR_X86_SIMD (set by CMake when ATHANOR_SIMD=ON on x86-64) adds AVX2
// and F16C paths chosen at run time by CPUID; without it (aarch64, or
// ATHANOR_SIMD=OFF) only the portable loops exist.
#if ATHANOR_X86_SIMD
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

namespace athanor {
namespace {

template <ReduceOp kOp, typename T>
inline T Combine(T x, T y) {
  if constexpr (kOp == ReduceOp::kMax) return x > y ? x : y;
  if constexpr (kOp == ReduceOp::kMin) return x < y ? x : y;
  return x + y;
}

template <ReduceOp kOp, typename T>
void ReduceNative(T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Combine<kOp>(a[i], b[i]);
}

inline float Bf16Bits(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t ToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

template <ReduceOp kOp>
void ReduceBf16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = ToBf16Bits(Combine<kOp>(Bf16Bits(a[i]), Bf16Bits(b[i])));
}

#if ATHANOR_X86_SIMD
template <ReduceOp kOp>
__attribute__((target("avx2"), always_inline)) inline __m256 Combine8(__m256 x, __m256 y) {
  if constexpr (kOp == ReduceOp::kMax) return _mm256_max_ps(x, y);
  if constexpr (kOp == ReduceOp::kMin) return _mm256_min_ps(x, y);
  return _mm256_add_ps(x, y);
}

__attribute__((target("avx2"), always_inline)) inline __m256 LoadBf16x8(const uint16_t* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Round-to-nearest-even to bf16, NaN kept quiet; same rule as ToBf16Bits.
__attribute__((target("avx2"), always_inline)) inline void StoreBf16x8(uint16_t* p, __m256 r) {
  __m256i u = _mm256_castps_si256(r);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
  __m256i out = _mm256_blendv_epi8(rounded, nan, is_nan);
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out, out), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

template <ReduceOp kOp>
__attribute__((target("avx2"))) void ReduceBf16Avx2(uint16_t* dst, const uint16_t* a,
                                                    const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) StoreBf16x8(dst + i, Combine8<kOp>(LoadBf16x8(a + i), LoadBf16x8(b + i)));
  ReduceBf16<kOp>(dst + i, a + i, b + i, n - i);
}

#endif  // ATHANOR_X86_SIMD

uint16_t F16FromFloatPortable(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    int shift = 113 - static_cast<int>(abs >> 23) + 13;  // to a 10-bit subnormal mantissa
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t out = mant >> shift;
    if (rest > half || (rest == half && (out & 1u))) ++out;
    return static_cast<uint16_t>(sign | out);
  }
  uint32_t out = ((abs - 0x38000000u) >> 13);
  uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (out & 1u))) ++out;
  return static_cast<uint16_t>(sign | out);
}

float F16ToFloatPortable(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | ((112 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <ReduceOp kOp>
void ReduceF16Portable(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = F16FromFloatPortable(Combine<kOp>(F16ToFloatPortable(a[i]), F16ToFloatPortable(b[i])));
  }
}

#if ATHANOR_X86_SIMD
template <ReduceOp kOp>
__attribute__((target("avx2,f16c"))) void ReduceF16F16c(uint16_t* dst, const uint16_t* a,
                                                        const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r = Combine8<kOp>(x, y);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ReduceF16Portable<kOp>(dst + i, a + i, b + i, n - i);
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know it);
// AVX2's check already covers the OS saving the YMM registers.
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return HasAvx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}
#endif  // ATHANOR_X86_SIMD

template <ReduceOp kOp>
void ReduceTyped(DataType type, void* dst, const void* a, const void* b, size_t n) {
  switch (type) {
    case DataType::kF32:
      return ReduceNative<kOp>(static_cast<float*>(dst), static_cast<const float*>(a),
                               static_cast<const float*>(b), n);
    case DataType::kI32:
      return ReduceNative<kOp>(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                               static_cast<const int32_t*>(b), n);
    case DataType::kI64:
      return ReduceNative<kOp>(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                               static_cast<const int64_t*>(b), n);
    case DataType::kBF16:
#if ATHANOR_X86_SIMD
      if (HasAvx2()) {
        return ReduceBf16Avx2<kOp>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                   static_cast<const uint16_t*>(b), n);
      }
#endif
      return ReduceBf16<kOp>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                             static_cast<const uint16_t*>(b), n);
    case DataType::kF16:
#if ATHANOR_X86_SIMD
      if (HasF16c()) {
        return ReduceF16F16c<kOp>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                  static_cast<const uint16_t*>(b), n);
      }
#endif
      return ReduceF16Portable<kOp>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                    static_cast<const uint16_t*>(b), n);
  }
}

}  // namespace

void ReduceBuffers(DataType type, ReduceOp op, void* dst, const void* a, const void* b,
                   size_t count) {
  switch (op) {
    case ReduceOp::kMax: return ReduceTyped<ReduceOp::kMax>(type, dst, a, b, count);
    case ReduceOp::kMin: return ReduceTyped<ReduceOp::kMin>(type, dst, a, b, count);
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return ReduceTyped<ReduceOp::kSum>(type, dst, a, b, count);
  }
}

void ScaleForAvg(DataType type, void* buf, size_t n, int divisor) {
  switch (type) {
    case DataType::kF32: {
      float* p = static_cast<float*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<float>(divisor);
      return;
    }
    case DataType::kI32: {
      int32_t* p = static_cast<int32_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kI64: {
      int64_t* p = static_cast<int64_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kBF16: {
      uint16_t* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] = ToBf16Bits(Bf16Bits(p[i]) / static_cast<float>(divisor));
      return;
    }
    case DataType::kF16: {
      uint16_t* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        p[i] = F16FromFloatPortable(F16ToFloatPortable(p[i]) / static_cast<float>(divisor));
      }
      return;
    }
  }
}

float Bf16ToFloat(uint16_t h) { return Bf16Bits(h); }
uint16_t FloatToBf16(float f) { return ToBf16Bits(f); }
float F16ToFloat(uint16_t h) { return F16ToFloatPortable(h); }
uint16_t FloatToF16(float f) { return F16FromFloatPortable(f); }

}  // namespace athanor
