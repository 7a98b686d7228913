#include "checkpoint/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(ATHANOR_X86_SIMD) && defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define ATHANOR_STREAM_COPY_SSE2 1
#endif

namespace athanor {

void StreamCopy(void* dst, const void* src, size_t n) {
#ifdef ATHANOR_STREAM_COPY_SSE2
  if (n >= kStreamCopyMinBytes) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    // Up to the destination's first 16-byte boundary, as memcpy; streaming
    // stores need aligned destinations, loads may be unaligned.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (size_t blocks = n / 64; blocks > 0; --blocks, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, n % 64);
    _mm_sfence();  // streaming stores are weakly ordered: order them before what follows
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace athanor
