// Elastic jobs in the scheduler core: as many nodes as free from the least
// up to the most, nothing preempted past the least, quotas and restores.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::Where;
using std::chrono::seconds;

class ElasticTest : public ::testing::Test {
 protected:
  ElasticTest() : sched_(&clock_, SchedulerOptions{}) {
    for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(sched_.AddNode(MakeNode(name, 4)).ok());
  }
  static JobRequest Elastic(const std::string& id, int least, int most, int priority = 0) {
    JobRequest job = MakeJob(id, most, 4, "t", priority);
    job.min_nodes = least;
    return job;
  }
  static JobRequest Preemptible(const std::string& id) {
    JobRequest job = MakeJob(id, 1, 4);
    job.preemptible = true;
    return job;
  }
  std::vector<std::string> Reasons(const JobId& id) {
    auto why = sched_.view().Why(id);
    EXPECT_TRUE(why.ok());
    return why.ok() ? why->reasons : std::vector<std::string>{};
  }

  FakeClock clock_;
  Scheduler sched_;
};

TEST_F(ElasticTest, StartsOnEveryNodeWhenAllAreFree) {
  ASSERT_TRUE(sched_.Submit(Elastic("E", 2, 3)).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"a:0,1,2,3", "b:0,1,2,3", "c:0,1,2,3"}));
  EXPECT_EQ(sched_.view().job("E")->held_gpus(), 12);
}

TEST_F(ElasticTest, StartsOnWhatIsFreeBetweenItsLeastAndItsMost) {
  ASSERT_TRUE(sched_.Submit(MakeJob("R", 1, 4)).ok());
  ASSERT_EQ(sched_.Schedule().size(), 1u);
  ASSERT_TRUE(sched_.Submit(Elastic("E", 2, 3)).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "E");
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"b:0,1,2,3", "c:0,1,2,3"}));
  EXPECT_EQ(sched_.view().job("E")->held_gpus(), 8);
  // Its exit gives back what it held, not what it asked for.
  ASSERT_TRUE(sched_.OnJobExited("E", false).ok());
  ASSERT_TRUE(sched_.Submit(MakeJob("R2", 2, 4)).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "R2");
}

TEST_F(ElasticTest, WaitsBelowItsLeastAndSaysWhat) {
  ASSERT_TRUE(sched_.Submit(MakeJob("R", 2, 4)).ok());
  ASSERT_EQ(sched_.Schedule().size(), 1u);
  ASSERT_TRUE(sched_.Submit(Elastic("E", 2, 3)).ok());
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(Reasons("E")[0], "no node fits: needs 2 to 3 nodes with 4 free GPUs each; 1 node has them free");
}

TEST_F(ElasticTest, PreemptsOnlyToReachItsLeast) {
  for (const char* id : {"L1", "L2", "L3"}) {
    ASSERT_TRUE(sched_.Submit(Preemptible(id)).ok());
  }
  ASSERT_EQ(sched_.Schedule().size(), 3u);
  clock_.Advance(seconds(400));
  ASSERT_TRUE(sched_.OnJobExited("L3", false).ok());  // c is free
  ASSERT_TRUE(sched_.Submit(Elastic("E", 2, 3, /*priority=*/9)).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);  // one victim: the least is 2, and c is free
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  ASSERT_TRUE(sched_.OnJobExited(d[0].job, true).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "E");
  EXPECT_EQ(d[0].placement.size(), 2u);
}

TEST_F(ElasticTest, NeverPreemptsToGrowPastItsLeast) {
  ASSERT_TRUE(sched_.Submit(Preemptible("L")).ok());
  ASSERT_EQ(sched_.Schedule().size(), 1u);
  clock_.Advance(seconds(400));
  ASSERT_TRUE(sched_.Submit(Elastic("E", 2, 3, /*priority=*/9)).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kStart);
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"b:0,1,2,3", "c:0,1,2,3"}));
  EXPECT_EQ(sched_.view().job("L")->state, QueuedJobState::kRunning);
}

TEST_F(ElasticTest, TakesNoMoreThanItsTenantsQuotaLeaves) {
  sched_.SetTenant("t", 8);
  ASSERT_TRUE(sched_.Submit(Elastic("E", 1, 3)).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].placement.size(), 2u);
  // Its least over the quota is refused at submit.
  EXPECT_EQ(sched_.Submit(Elastic("F", 3, 3)).message(), "job F needs 12 GPUs but tenant t has a quota of 8");
}

TEST_F(ElasticTest, RefusesALeastOutsideOneToItsMost) {
  EXPECT_EQ(sched_.Submit(Elastic("E", 4, 3)).message(),
            "job E asks for at least 4 of 3 node(s); the least must be 1..3");
  EXPECT_EQ(sched_.Submit(Elastic("F", -1, 3)).message(),
            "job F asks for at least -1 of 3 node(s); the least must be 1..3");
}

TEST_F(ElasticTest, RestoresARunningAttemptOfAnySizeInItsRange) {
  std::vector<NodeAllocation> two = {{"a", {0, 1, 2, 3}}, {"b", {0, 1, 2, 3}}};
  ASSERT_TRUE(sched_.Restore(Elastic("E", 2, 3), two, clock_.Now(), std::nullopt, std::nullopt).ok());
  EXPECT_EQ(sched_.view().job("E")->held_gpus(), 8);
  std::vector<NodeAllocation> one = {{"c", {0, 1, 2, 3}}};
  EXPECT_EQ(sched_.Restore(Elastic("F", 2, 3), one, clock_.Now(), std::nullopt, std::nullopt).message(),
            "job F needs 2 to 3 node(s) but the placement has 1");
}

}  // namespace
}  // namespace athanor::sched
