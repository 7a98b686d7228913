#include "coordinator/checkpoints/checkpoint_uploads.h"

#include <gtest/gtest.h>

namespace athanor::coord {
namespace {

class UploadsTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  CheckpointUploads uploads_{Seconds(60)};
};

TEST_F(UploadsTest, AHandedOffStepNewerThanTheCommitIsWaitedFor) {
  EXPECT_FALSE(uploads_.MustWait("j", 10, clock_.Now()).has_value());
  const TimePoint t0 = clock_.Now();
  uploads_.HandedOff("j", 1, 20, 0, 2, t0);
  EXPECT_FALSE(uploads_.MustWait("j", 10, t0).has_value());  // rank 1 has not yet
  uploads_.HandedOff("j", 1, 20, 1, 2, t0 + Seconds(1));
  std::optional<CheckpointUploads::Wait> w = uploads_.MustWait("j", 10, t0 + Seconds(2));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->step, 20);
  EXPECT_EQ(w->ranks, 2);
  EXPECT_EQ(w->until, t0 + Seconds(60));
  // The commit of that step ends the wait and forgets it.
  EXPECT_FALSE(uploads_.MustWait("j", 20, t0 + Seconds(3)).has_value());
  EXPECT_TRUE(uploads_.Jobs().empty());
}

TEST_F(UploadsTest, AFailureEndsTheWaitForThatStepOnly) {
  const TimePoint t0 = clock_.Now();
  uploads_.HandedOff("j", 1, 20, 0, 1, t0);
  uploads_.HandedOff("j", 1, 30, 0, 1, t0);
  uploads_.Failed("j", 1, 30);
  std::optional<CheckpointUploads::Wait> w = uploads_.MustWait("j", 10, t0);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->step, 20);  // 30 cannot commit; 20 still may
  uploads_.Failed("j", 1, 20);
  EXPECT_FALSE(uploads_.MustWait("j", 10, t0).has_value());
}

TEST_F(UploadsTest, TheBoundEndsTheWaitOnceAndSaysSo) {
  const TimePoint t0 = clock_.Now();
  uploads_.HandedOff("j", 1, 20, 0, 1, t0);
  EXPECT_TRUE(uploads_.MustWait("j", 10, t0 + Seconds(59)).has_value());
  EXPECT_FALSE(uploads_.TakeGaveUp("j").has_value());
  EXPECT_FALSE(uploads_.MustWait("j", 10, t0 + Seconds(60)).has_value());
  EXPECT_EQ(uploads_.TakeGaveUp("j"), std::optional<int64_t>(20));
  EXPECT_FALSE(uploads_.TakeGaveUp("j").has_value());  // once
  EXPECT_FALSE(uploads_.MustWait("j", 10, t0 + Seconds(61)).has_value());
}

TEST_F(UploadsTest, ANewerAttemptStartsAStepOverAndOlderReportsAreIgnored) {
  const TimePoint t0 = clock_.Now();
  uploads_.HandedOff("j", 1, 20, 0, 1, t0);
  uploads_.Failed("j", 1, 20);
  // Attempt 2 resumed from an older step and hands off step 20 again.
  uploads_.HandedOff("j", 2, 20, 0, 1, t0 + Seconds(5));
  uploads_.Failed("j", 1, 20);  // a late report of attempt 1
  std::optional<CheckpointUploads::Wait> w = uploads_.MustWait("j", 10, t0 + Seconds(6));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->step, 20);
  EXPECT_EQ(w->ranks, 1);
  EXPECT_EQ(w->until, t0 + Seconds(65));
  uploads_.HandedOff("j", 1, 20, 0, 1, t0 + Seconds(7));  // attempt 1's, late: ignored
  EXPECT_EQ(uploads_.MustWait("j", 10, t0 + Seconds(7))->ranks, 1);
  uploads_.Forget("j");
  EXPECT_FALSE(uploads_.MustWait("j", 10, t0 + Seconds(7)).has_value());
}

TEST_F(UploadsTest, ACommitForgetsTheStepsUpToIt) {
  const TimePoint t0 = clock_.Now();
  uploads_.HandedOff("j", 1, 20, 0, 1, t0);
  uploads_.HandedOff("j", 1, 30, 0, 1, t0);
  uploads_.Committed("j", 20);
  EXPECT_EQ(uploads_.MustWait("j", 10, t0)->step, 30);
  uploads_.Committed("j", 30);
  EXPECT_TRUE(uploads_.Jobs().empty());
}

}  // namespace
}  // namespace athanor::coord
