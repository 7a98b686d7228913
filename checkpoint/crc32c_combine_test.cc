#include "checkpoint/crc32c_combine.h"

#include <gtest/gtest.h>

#include "common/crc32c.h"

namespace athanor {
namespace {

TEST(Crc32cCombine, EqualsTheCrcOfTheConcatenation) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 251);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{99999}, size_t{100000}}) {
    uint32_t a = crc32c::Value(data.data(), split);
    uint32_t b = crc32c::Value(data.data() + split, data.size() - split);
    EXPECT_EQ(Crc32cCombine(a, b, data.size() - split), crc32c::Value(data)) << split;
  }
  // The standard check value: CRC32C("123456789") = 0xE3069283.
  EXPECT_EQ(Crc32cCombine(crc32c::Value("1234"), crc32c::Value("56789"), 5), 0xE3069283u);
}

}  // namespace
}  // namespace athanor
