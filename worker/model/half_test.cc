#include "worker/model/half.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(HalfTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: goes up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_EQ(RoundTo(Precision::kBF16, 3.14159265f), 3.140625f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

TEST(HalfTest, F16ExactValuesAndRounding) {
  EXPECT_EQ(FloatToF16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToF16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(RoundTo(Precision::kF16, 3.14159265f), 3.140625f);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even.
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 3.0f / 2048)), 1.0f + 1.0f / 512);
}

TEST(HalfTest, F16OverflowAndSubnormals) {
  EXPECT_EQ(FloatToF16(65519.0f), 0x7bff);  // rounds down to max
  EXPECT_EQ(FloatToF16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(FloatToF16(-1e6f), 0xfc00);
  EXPECT_EQ(F16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -26)), 0x0000);  // underflows to zero
  EXPECT_EQ(FloatToF16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal units -> 2 (even)
}

TEST(HalfTest, PackUnpackRoundTrip) {
  const float in[4] = {0.5f, -1.25f, 1024.0f, 0.0f};
  uint16_t packed[4];
  float out[4];
  for (Precision p : {Precision::kBF16, Precision::kF16}) {
    PackHalf(p, in, packed, 4);
    UnpackHalf(p, packed, out, 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], in[i]) << PrecisionName(p);
  }
  Precision p;
  EXPECT_TRUE(ParsePrecision("bf16", &p));
  EXPECT_EQ(p, Precision::kBF16);
  EXPECT_FALSE(ParsePrecision("fp8", &p));
}

}  // namespace
}  // namespace athanor

namespace athanor {
namespace {

// The vectorised array paths must agree bit for bit with the scalar
// conversions the collectives use, over many bit patterns.
TEST(HalfTest, ArrayPathsMatchScalarConversions) {
  std::vector<float> in;
  for (uint32_t u = 0; u < 0xffffffffu - 65521u * 7; u += 65521u * 7) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    in.push_back(f);
  }
  for (float f : {65504.0f, 65519.0f, 65520.0f, 1e-8f, -3.0e-7f, 0.0f, -0.0f}) in.push_back(f);
  for (Precision p : {Precision::kBF16, Precision::kF16}) {
    std::vector<float> rounded(in.size()), unpacked(in.size());
    std::vector<uint16_t> packed(in.size());
    RoundArray(p, in.data(), rounded.data(), in.size());
    PackHalf(p, in.data(), packed.data(), in.size());
    UnpackHalf(p, packed.data(), unpacked.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = p == Precision::kBF16 ? FloatToBf16(in[i]) : FloatToF16(in[i]);
      const float back = p == Precision::kBF16 ? Bf16ToFloat(want) : F16ToFloat(want);
      if (std::isnan(in[i])) {
        ASSERT_TRUE(std::isnan(rounded[i]) && std::isnan(unpacked[i])) << i;
        continue;
      }
      ASSERT_EQ(packed[i], want) << PrecisionName(p) << " " << in[i];
      ASSERT_EQ(std::memcmp(&rounded[i], &back, 4), 0) << PrecisionName(p) << " " << in[i];
      ASSERT_EQ(std::memcmp(&unpacked[i], &back, 4), 0) << PrecisionName(p) << " " << in[i];
    }
  }
}

}  // namespace
}  // namespace athanor
