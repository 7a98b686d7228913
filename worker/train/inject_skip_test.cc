// The skipped-all-reduce test hook: its parsing, and that it skips exactly
// the first all-reduce of its step, once, leaving the buffer unreduced. The
// straggler hook's parsing too.
#include "worker/train/inject_skip.h"
#include "worker/train/inject_slow.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "worker/train/testing/recording_communicator.h"

namespace athanor {
namespace {

TEST(SkipPlanTest, ParsesRankStepAndAttempt) {
  absl::StatusOr<SkipPlan> off = ParseSkipPlan("");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->AppliesTo(0, 1));
  absl::StatusOr<SkipPlan> p = ParseSkipPlan("1:40");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->rank, 1);
  EXPECT_EQ(p->step, 40);
  EXPECT_EQ(p->attempt, 1);
  EXPECT_TRUE(p->AppliesTo(1, 1));
  EXPECT_TRUE(p->AppliesTo(1, 0));  // no coordinator: the first attempt
  EXPECT_FALSE(p->AppliesTo(0, 1));
  EXPECT_FALSE(p->AppliesTo(1, 2));  // the requeued attempt trains normally
  absl::StatusOr<SkipPlan> third = ParseSkipPlan("0:7:3");
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->AppliesTo(0, 3));
  EXPECT_FALSE(third->AppliesTo(0, 1));
  for (const char* bad : {"1", "1:2:3:4", "x:2", "1:-2", "-1:2", "1:2:0", "1:2:", ":2"}) {
    absl::StatusOr<SkipPlan> b = ParseSkipPlan(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("ATHANOR_TEST_SKIP_ALLREDUCE expects RANK:STEP[:ATTEMPT]"),
              std::string::npos)
        << b.status();
  }
}

TEST(SlowPlanTest, ParsesRankStepsFactorAndAttempt) {
  absl::StatusOr<SlowPlan> every = ParseSlowPlan("1:20:30:2");
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_TRUE(every->Applies(1, 20, 1));
  EXPECT_TRUE(every->Applies(1, 29, 3));
  EXPECT_FALSE(every->Applies(1, 30, 1));
  EXPECT_FALSE(every->Applies(0, 25, 1));
  EXPECT_DOUBLE_EQ(every->factor, 2);
  absl::StatusOr<SlowPlan> first = ParseSlowPlan("1:20:30:2:1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->Applies(1, 25, 1));
  EXPECT_TRUE(first->Applies(1, 25, 0));  // no coordinator: the first attempt
  EXPECT_FALSE(first->Applies(1, 25, 2));
  EXPECT_FALSE(ParseSlowPlan("")->Applies(0, 0, 1));
  for (const char* bad : {"1:20:30", "1:20:30:2:0", "1:20:30:2:x", "1:30:20:2", "1:20:30:0.5",
                          "1:20:30:2:1:1"}) {
    absl::StatusOr<SlowPlan> b = ParseSlowPlan(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("--inject-slow expects RANK:FROM:TO:FACTOR[:ATTEMPT]"),
              std::string::npos)
        << b.status();
  }
}

TEST(SkipPlanTest, ReadsTheEnvironment) {
  std::map<std::string, std::string> vars = {{"ATHANOR_TEST_SKIP_ALLREDUCE", "2:9"}};
  EnvLookup env = [&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  absl::StatusOr<SkipPlan> p = SkipPlanFromEnv(env);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->step, 9);
  vars.clear();
  p = SkipPlanFromEnv(env);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rank, -1);
}

TEST(SkipAllReduceCommunicatorTest, SkipsTheFirstAllReduceOfItsStepOnce) {
  RecordingCommunicator inner(2);
  SkipPlan plan;
  plan.rank = 0;
  plan.step = 3;
  SkipAllReduceCommunicator comm(&inner, plan);
  CollectiveOptions opts;
  float v[2] = {1, 2};
  for (int64_t step = 0; step < 5; ++step) {
    comm.SetStep(step);
    for (uint64_t tag : {1000, 1}) {
      opts.tag = tag;
      v[0] = 1;
      v[1] = 2;
      std::unique_ptr<Work> w = comm.AllReduceAsync(v, v, 2, DataType::kF32, ReduceOp::kSum, opts);
      EXPECT_TRUE(w->Done());
      ASSERT_TRUE(w->Wait(std::chrono::seconds(1)).ok());
      const bool skipped = step == 3 && tag == 1000;
      EXPECT_EQ(v[0], skipped ? 1.0f : 2.0f) << step << " " << tag;  // the fake sums 2 ranks
      EXPECT_EQ(v[1], skipped ? 2.0f : 4.0f) << step << " " << tag;
    }
  }
  EXPECT_TRUE(comm.fired());
  ASSERT_EQ(inner.calls().size(), 9u);  // 10 issued, one skipped
  EXPECT_EQ(inner.calls()[6].tag, 1u);  // step 3 sent only its second one
  // Out of place: the skipped call leaves its own values in the output.
  RecordingCommunicator inner2(2);
  SkipAllReduceCommunicator again(&inner2, plan);
  again.SetStep(3);
  float in[3] = {4, 5, 6}, out[3] = {0, 0, 0};
  ASSERT_TRUE(again.AllReduceAsync(in, out, 3, DataType::kF32, ReduceOp::kSum, opts)
                  ->Wait(std::chrono::seconds(1))
                  .ok());
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[2], 6.0f);
  EXPECT_TRUE(inner2.calls().empty());
}

}  // namespace
}  // namespace athanor
