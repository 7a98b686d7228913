#include "common/crc32c.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(Crc32c, KnownVectors) {
  // Check values from RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc32c::Value("123456789"), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(crc32c::Value(ones.data(), ones.size()), 0x62A8AB43u);
  std::vector<uint8_t> inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c::Value(inc.data(), inc.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c::Value("", 0), 0u);
}

TEST(Crc32c, ExtendEqualsWhole) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  uint32_t whole = crc32c::Value(data);
  for (size_t cut : {0ul, 1ul, 7ul, 8ul, 9ul, 500ul, 999ul, 1000ul}) {
    uint32_t part = crc32c::Extend(0, data.data(), cut);
    part = crc32c::Extend(part, data.data() + cut, data.size() - cut);
    EXPECT_EQ(part, whole) << "cut at " << cut;
  }
}

TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 251);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{99999}, size_t{100000}}) {
    uint32_t a = crc32c::Value(data.data(), split);
    uint32_t b = crc32c::Value(data.data() + split, data.size() - split);
    EXPECT_EQ(crc32c::Combine(a, b, data.size() - split), crc32c::Value(data)) << split;
  }
  EXPECT_EQ(crc32c::Combine(crc32c::Value("1234"), crc32c::Value("56789"), 5), 0xE3069283u);
}

TEST(Crc32c, LargeBuffersMatchSmallPieces) {
  // Buffers past the interleaving threshold take the three-chain path; small
  // pieces take the single chain. Odd sizes exercise the tails.
  for (size_t size : {65536ul, 65537ul, 300007ul, 1ul << 20}) {
    std::string data(size, '\0');
    uint32_t x = 12345;
    for (auto& ch : data) {
      x = x * 1103515245u + 12345u;
      ch = static_cast<char>(x >> 24);
    }
    uint32_t pieces = 0;
    for (size_t pos = 0; pos < size; pos += 1000) {
      pieces = crc32c::Extend(pieces, data.data() + pos, std::min<size_t>(1000, size - pos));
    }
    EXPECT_EQ(crc32c::Value(data), pieces) << "size " << size;
    uint32_t head = crc32c::Extend(0, data.data(), 7);
    EXPECT_EQ(crc32c::Extend(head, data.data() + 7, size - 7), pieces) << "size " << size;
  }
}

}  // namespace
}  // namespace athanor
