#include "checkpoint/stream_copy.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

// Every byte distinct from its neighbours and from the destination's fill.
std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    v[i] = static_cast<uint8_t>(x | 1);
  }
  return v;
}

TEST(StreamCopy, CopiesExactlyAtEveryAlignmentAndTail) {
  // Below the streaming threshold, at it and above it; source and destination
  // offsets that leave heads of 0..15 bytes and tails of 0..63.
  const size_t sizes[] = {0, 1, 63, 4096, kStreamCopyMinBytes - 1, kStreamCopyMinBytes,
                          kStreamCopyMinBytes + 1, kStreamCopyMinBytes + 63,
                          3 * kStreamCopyMinBytes + 17};
  const std::vector<uint8_t> src = Pattern(3 * kStreamCopyMinBytes + 17 + 64);
  for (size_t n : sizes) {
    for (size_t dst_off : {0, 1, 8, 15}) {
      for (size_t src_off : {0, 3}) {
        std::vector<uint8_t> dst(n + 32, 0);
        StreamCopy(dst.data() + dst_off, src.data() + src_off, n);
        for (size_t i = 0; i < dst_off; ++i) ASSERT_EQ(dst[i], 0) << n << " " << dst_off;
        ASSERT_EQ(0, std::memcmp(dst.data() + dst_off, src.data() + src_off, n))
            << "size " << n << ", destination offset " << dst_off << ", source offset " << src_off;
        for (size_t i = dst_off + n; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0) << "wrote past the end: size " << n << ", offset " << dst_off;
        }
      }
    }
  }
}

}  // namespace
}  // namespace athanor
