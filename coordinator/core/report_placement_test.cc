// Which agent reports the coordinator acts on (report_placement.h), and that
// ClusterState applies only those: another node's rank reported exited by
// this node leaves the job running.
#include "coordinator/health/report_placement.h"

#include <gtest/gtest.h>

#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

JobRecord TwoNodeJob() {
  JobRecord j;
  j.id = "4";
  j.attempt = 2;
  j.allocated = true;
  j.allocation = {{0, "node-a", 0, 0, {0}}, {1, "node-b", 0, 1, {0}}};
  j.attempt_nodes = {{"node-c"}, {"node-a", "node-b"}};
  return j;
}

RankReport Exited(const std::string& job, int32_t attempt, int32_t rank) {
  RankReport r;
  r.job_id = job;
  r.attempt = attempt;
  r.rank = rank;
  r.phase = RankPhase::kExited;
  return r;
}

TEST(ReportPlacementTest, OnlyRanksPlacedOnTheNodeInTheCurrentAttemptFit) {
  const JobRecord job = TwoNodeJob();
  std::string why;
  EXPECT_EQ(FitOf(&job, "node-a", Exited("4", 2, 0), &why), ReportFit::kPlaced);
  EXPECT_EQ(FitOf(&job, "node-b", Exited("4", 2, 1), &why), ReportFit::kPlaced);
  EXPECT_EQ(FitOf(&job, "node-c", Exited("4", 1, 0), &why), ReportFit::kStale);
  EXPECT_EQ(FitOf(&job, "node-a", Exited("4", 2, 1), &why), ReportFit::kForeign);
  EXPECT_EQ(why, "job '4' attempt 2 rank 1: placed on node node-b");
  EXPECT_EQ(FitOf(&job, "node-a", Exited("4", 1, 0), &why), ReportFit::kForeign);
  EXPECT_EQ(why, "job '4' attempt 1 rank 0: that attempt had no rank on this node");
  EXPECT_EQ(FitOf(&job, "node-a", Exited("4", 3, 0), &why), ReportFit::kForeign);
  EXPECT_EQ(why, "job '4' attempt 3 rank 0: not an attempt of the job (current: 2)");
  EXPECT_EQ(FitOf(&job, "node-a", Exited("4", 2, 7), &why), ReportFit::kForeign);
  EXPECT_EQ(why, "job '4' attempt 2 rank 7: not a rank of the attempt (2 ranks)");
  EXPECT_EQ(FitOf(nullptr, "node-a", Exited("9\n[forged] line\x1b", 1, 0), &why), ReportFit::kForeign);
  EXPECT_EQ(why, "job '9\\n[forged] line\\x1b' attempt 1 rank 0: no such job");
}

TEST(ReportPlacementTest, ForeignReportsAreDroppedAndNamedOnce) {
  const JobRecord job = TwoNodeJob();
  auto find = [&](const std::string& id) { return id == "4" ? &job : nullptr; };
  std::vector<RankReport> kept = PlacedReports(
      "node-a", {Exited("4", 2, 0), Exited("4", 2, 1), Exited("4", 3, 0), Exited("x", 1, 0), Exited("4", 1, 0)},
      find);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].rank, 0);
  EXPECT_EQ(DescribeForeign("node-a", {"w1", "w2", "w3", "w4", "w5"}),
            "node 'node-a' reported 5 rank(s) not placed on it; ignored: w1; w2; w3 (and 2 more)");
  EXPECT_EQ(DescribeForeign("node-a", {}), "");
}

// Through ClusterState: node-a's heartbeat reporting the rank placed on
// node-b exited 0 (or hung) changes nothing; node-b's own report ends it.
TEST(ReportPlacementTest, AnotherNodesRankReportedExitedIsNotApplied) {
  FakeClock clock;
  ClusterState state(StateOptions(), &clock);
  for (const char* name : {"node-a", "node-b"}) {
    NodeRecord n;
    n.name = name;
    n.host = name;
    n.inventory.gpus = 1;
    ASSERT_TRUE(state.agents().Register(n, {}).ok());
  }
  JobSpec a;
  a.tenant = "alpha";
  a.command = {"train"};
  const std::string victim = state.SubmitJob(a)->job_id;
  JobSpec b = a;
  b.tenant = "beta";
  const std::string own = state.SubmitJob(b)->job_id;
  const std::string victim_node = state.jobs().Find(victim)->allocation[0].node;
  const std::string other = victim_node == "node-a" ? "node-b" : "node-a";
  RankReport running = Exited(victim, 1, 0);
  running.phase = RankPhase::kRunning;
  ASSERT_TRUE(state.agents().Heartbeat(victim_node, 0, {running}));
  ASSERT_EQ(state.jobs().Find(victim)->state, JobState::kRunning);

  ASSERT_TRUE(state.agents().Heartbeat(other, 0, {Exited(victim, 1, 0)}));
  EXPECT_EQ(state.jobs().Find(victim)->state, JobState::kRunning);
  EXPECT_FALSE(state.jobs().Find(victim)->ranks[0].exited);
  EXPECT_EQ(state.jobs().Find(own)->state, JobState::kStarting);
  // Re-registering with the forged report changes nothing either.
  NodeRecord again;
  again.name = other;
  again.host = other;
  again.inventory.gpus = 1;
  ASSERT_TRUE(state.agents().Register(again, {Exited(victim, 1, 0)}).ok());
  EXPECT_EQ(state.jobs().Find(victim)->state, JobState::kRunning);

  ASSERT_TRUE(state.agents().Heartbeat(victim_node, 0, {Exited(victim, 1, 0)}));
  EXPECT_EQ(state.jobs().Find(victim)->state, JobState::kSucceeded);
}

}  // namespace
}  // namespace athanor::coord
