#include "common/crc32c.h"

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

}  // namespace
}  // namespace athanor
