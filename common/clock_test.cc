#include "common/clock.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock(1000);
  TimePoint t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(Seconds(2.5));
  EXPECT_EQ(clock.Now() - t0, Millis(2500));
  EXPECT_EQ(clock.UnixSeconds(), 1002);
}

}  // namespace
}  // namespace athanor
