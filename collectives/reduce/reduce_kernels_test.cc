#include "collectives/reduce/reduce_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (up).
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xC000);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(Bf16ToFloat(0x4040), 3.0f);
}

TEST(F16, ConvertsExactlyAndRoundsToNearestEven) {
  EXPECT_EQ(FloatToF16(1.0f), 0x3C00);
  EXPECT_EQ(FloatToF16(-2.5f), 0xC100);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToF16(70000.0f), 0x7C00);               // overflow to inf
  EXPECT_EQ(FloatToF16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie to even
  EXPECT_EQ(FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie to even (up)
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToFloat(0x7BFF), 65504.0f);
  for (int v = -2048; v <= 2048; ++v) EXPECT_EQ(F16ToFloat(FloatToF16(v)), v);
}

TEST(ReduceBuffers, EveryTypeAndOp) {
  const size_t n = 37;  // not a multiple of any vector width
  std::vector<float> a(n), b(n), out(n);
  std::vector<uint16_t> ha(n), hb(n), hout(n), ba(n), bb(n), bout(n);
  std::vector<int64_t> la(n), lb(n), lout(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i) - 10, b[i] = 20 - static_cast<float>(i);
    ha[i] = FloatToF16(a[i]), hb[i] = FloatToF16(b[i]);
    ba[i] = FloatToBf16(a[i]), bb[i] = FloatToBf16(b[i]);
    la[i] = (static_cast<int64_t>(i) - 10) * 1'000'000'000LL;
    lb[i] = (20 - static_cast<int64_t>(i)) * 1'000'000'000LL;
  }
  ReduceBuffers(DataType::kF32, ReduceOp::kSum, out.data(), a.data(), b.data(), n);
  ReduceBuffers(DataType::kF16, ReduceOp::kMax, hout.data(), ha.data(), hb.data(), n);
  ReduceBuffers(DataType::kBF16, ReduceOp::kMin, bout.data(), ba.data(), bb.data(), n);
  ReduceBuffers(DataType::kI64, ReduceOp::kSum, lout.data(), la.data(), lb.data(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], 10.0f) << i;
    EXPECT_EQ(F16ToFloat(hout[i]), std::max(a[i], b[i])) << i;
    EXPECT_EQ(Bf16ToFloat(bout[i]), std::min(a[i], b[i])) << i;
    EXPECT_EQ(lout[i], 10'000'000'000LL) << i;
  }
  // In place (dst == a), and avg scaling.
  ReduceBuffers(DataType::kF32, ReduceOp::kAvg, a.data(), a.data(), b.data(), n);
  ScaleForAvg(DataType::kF32, a.data(), n, 4);
  EXPECT_EQ(a[0], 2.5f);
  std::vector<int32_t> ia = {7, -7};
  ScaleForAvg(DataType::kI32, ia.data(), 2, 2);
  EXPECT_EQ(ia[0], 3);
  EXPECT_EQ(ia[1], -3);
}

TEST(ReduceBuffers, Bf16AccumulatesInF32ThenRounds) {
  // 256 + 1 is not representable in bf16: rounds to even (256).
  uint16_t a = FloatToBf16(256.0f), b = FloatToBf16(1.0f), out = 0;
  ReduceBuffers(DataType::kBF16, ReduceOp::kSum, &out, &a, &b, 1);
  EXPECT_EQ(Bf16ToFloat(out), 256.0f);
  b = FloatToBf16(3.0f);
  ReduceBuffers(DataType::kBF16, ReduceOp::kSum, &out, &a, &b, 1);
  EXPECT_EQ(Bf16ToFloat(out), 260.0f);  // 259 -> nearest even of 258/260
}

}  // namespace
}  // namespace athanor
