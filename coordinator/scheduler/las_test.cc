// The FIFO and least-attained-service orders (SchedulerOptions::policy), with
// exact decisions.
#include "coordinator/scheduler/las.h"

#include <gtest/gtest.h>

#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using std::chrono::seconds;
using testing::MakeJob;
using testing::MakeNode;

TEST(LasQueueTest, ThresholdsForgivenessAndPromotion) {
  LasOptions o;
  o.thresholds_gpu_s = {100, 1000};
  o.promote_knob = 2;
  QueuedJob job;
  job.req = MakeJob("j", 1, 2);  // 2 GPUs
  EXPECT_EQ(LasQueue(o, job, 0), 0);
  EXPECT_EQ(LasQueue(o, job, 99.9), 0);
  EXPECT_EQ(LasQueue(o, job, 100), 1);
  EXPECT_EQ(LasQueue(o, job, 5000), 2);
  job.las_forgiven_gpu_s = 4950;
  EXPECT_EQ(LasQueue(o, job, 5000), 0);

  // 200 GPU-s on 2 GPUs is 100 s run: promoted after 200 s pending.
  job.las_forgiven_gpu_s = 0;
  job.queued_at = TimePoint{} + seconds(1000);
  EXPECT_FALSE(LasStarved(o, job, 200, TimePoint{} + seconds(1199)));
  EXPECT_TRUE(LasStarved(o, job, 200, TimePoint{} + seconds(1200)));
  EXPECT_FALSE(LasStarved(o, job, 0, TimePoint{} + seconds(5000)));  // never ran: queue 0 already
  job.state = QueuedJobState::kRunning;
  EXPECT_FALSE(LasStarved(o, job, 200, TimePoint{} + seconds(5000)));
}

TEST(SchedulingPolicyTest, Names) {
  EXPECT_EQ(ParseSchedulingPolicy("las"), SchedulingPolicy::kLas);
  EXPECT_EQ(ParseSchedulingPolicy("default"), SchedulingPolicy::kDefault);
  EXPECT_EQ(ParseSchedulingPolicy("fifo"), SchedulingPolicy::kFifo);
  EXPECT_EQ(ParseSchedulingPolicy("LAS"), std::nullopt);
  EXPECT_STREQ(SchedulingPolicyName(SchedulingPolicy::kLas), "las");
}

class OrderTest : public ::testing::Test {
 protected:
  static SchedulerOptions Options(SchedulingPolicy policy) {
    SchedulerOptions o;
    o.policy = policy;
    o.min_run_time = seconds(0);
    o.las.thresholds_gpu_s = {50};
    return o;
  }
  // One 1-GPU node; `old` ran 100 s (100 GPU-s) and was requeued; `fresh`
  // is submitted after it. Returns the first pass's decisions.
  std::vector<Decision> RequeuedThenFresh(SchedulingPolicy policy) {
    sched_ = std::make_unique<Scheduler>(&clock_, Options(policy));
    EXPECT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    EXPECT_TRUE(sched_->Submit(MakeJob("old", 1, 1)).ok());
    EXPECT_EQ(sched_->Schedule().size(), 1u);
    clock_.Advance(seconds(100));
    EXPECT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());
    EXPECT_TRUE(sched_->Submit(MakeJob("fresh", 1, 1)).ok());
    return sched_->Schedule();
  }

  FakeClock clock_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(OrderTest, LasServesLeastAttainedFirst) {
  auto d = RequeuedThenFresh(SchedulingPolicy::kLas);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "fresh");
}

TEST_F(OrderTest, DefaultAndFifoServeSubmitOrder) {
  for (SchedulingPolicy p : {SchedulingPolicy::kDefault, SchedulingPolicy::kFifo}) {
    auto d = RequeuedThenFresh(p);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, "old") << SchedulingPolicyName(p);
  }
}

TEST_F(OrderTest, FifoIgnoresPriorityAndNeverPreemptsForIt) {
  sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kFifo));
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
  JobRequest low = MakeJob("low", 1, 1, "t", 0);
  low.preemptible = true;
  ASSERT_TRUE(sched_->Submit(low).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("high", 1, 1, "t", 5)).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "low");
  clock_.Advance(seconds(1000));
  EXPECT_TRUE(sched_->Schedule().empty());
}

TEST_F(OrderTest, LasPreemptsAHigherQueueOnlyJustAfterItsCheckpoint) {
  sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
  JobRequest old = MakeJob("old", 1, 1);
  old.preemptible = true;
  ASSERT_TRUE(sched_->Submit(old).ok());
  ASSERT_EQ(sched_->Schedule().size(), 1u);
  clock_.Advance(seconds(100));  // 100 GPU-s: queue 1
  ASSERT_TRUE(sched_->Submit(MakeJob("fresh", 1, 1)).ok());
  EXPECT_TRUE(sched_->Schedule().empty());  // no checkpoint yet: it would lose 100 s

  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  clock_.Advance(seconds(301));  // past the 300 s window
  EXPECT_TRUE(sched_->Schedule().empty());

  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "old");
}

}  // namespace
}  // namespace athanor::sched
