#include "common/money.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(MoneyTest, ParsesWhatPeopleType) {
  EXPECT_EQ(*ParseMoney("12", "amount"), 12000000);
  EXPECT_EQ(*ParseMoney("3.5", "amount"), 3500000);
  EXPECT_EQ(*ParseMoney("0.000001", "amount"), 1);
  EXPECT_EQ(*ParseMoney(".25", "amount"), 250000);
  EXPECT_EQ(*ParseMoney("-2.10", "amount", true), -2100000);
}

TEST(MoneyTest, RefusesWhatIsNotAnAmount) {
  EXPECT_EQ(ParseMoney("1.2345678", "--per-hour").status().message(),
            "--per-hour \"1.2345678\": at most 6 decimals");
  EXPECT_EQ(ParseMoney("-1", "AMOUNT").status().message(), "AMOUNT \"-1\": must not be negative");
  EXPECT_EQ(ParseMoney("3,50", "AMOUNT").status().message(),
            "AMOUNT \"3,50\": expected an amount such as 12 or 3.50");
  EXPECT_EQ(ParseMoney("", "AMOUNT").status().message(),
            "AMOUNT \"\": expected an amount such as 12 or 3.50");
  EXPECT_EQ(ParseMoney("1.", "AMOUNT").status().message(),
            "AMOUNT \"1.\": expected digits after '.'");
  EXPECT_EQ(ParseMoney("99999999999999", "AMOUNT").status().message(),
            "AMOUNT \"99999999999999\": too large");
}

TEST(MoneyTest, FormatsTwoToSixDecimals) {
  EXPECT_EQ(FormatMoney(3500000), "3.50");
  EXPECT_EQ(FormatMoney(1), "0.000001");
  EXPECT_EQ(FormatMoney(0), "0.00");
  EXPECT_EQ(FormatMoney(-1234500), "-1.2345");
  EXPECT_EQ(FormatMoney(INT64_MIN), "-9223372036854.775808");
}

}  // namespace
}  // namespace athanor
