// ClusterState's hang handling, driven by a FakeClock: the requeue with
// stacks captured first, auto-drain of a repeat suspect, and moving a job off
// a straggler's node. HangDetector alone: health/hang_detector_test.cc.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/health/test_util.h"

namespace athanor::coord {
namespace {

using testing::ProgressReport;

// Through ClusterState: the hung attempt is requeued with the reason, its
// ranks are told to capture stacks before the kill, and a node named twice
// is drained.
class ClusterHangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StateOptions o;
    o.kill_after_ms = 1000;
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"node-a", "node-b"}) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 1;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
  }
  // One heartbeat per node with each desired rank's page; the rank placed on
  // `stuck_node` keeps `stuck_step` and a stopped process.
  void Beat(int64_t step, const std::string& stuck_node, int64_t stuck_step) {
    for (const char* node : {"node-a", "node-b"}) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        bool stuck = node == stuck_node;
        RankReport r = ProgressReport(d.job_id, d.attempt, d.rank, stuck ? stuck_step : step,
                              stuck ? stuck_step : step, stuck ? 0 : step, stuck && stop_stuck_);
        if (d.terminate) r.phase = RankPhase::kExited;
        reports.push_back(r);
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
    state_->Tick();
  }
  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
  bool stop_stuck_ = true;  // the stuck rank's process is stopped
};

TEST_F(ClusterHangTest, HungAttemptIsRequeuedWithStacksAndRepeatSuspectDrained) {
  JobSpec spec;
  spec.nodes = 2;
  spec.gpus_per_node = 1;
  spec.tenant = "t";
  spec.command = {"train"};
  spec.max_restarts = 5;
  std::string id = state_->SubmitJob(spec)->job_id;
  Beat(0, "", 0);
  ASSERT_EQ(state_->jobs().Find(id)->state, JobState::kRunning);
  const std::string stuck = state_->jobs().Find(id)->allocation[1].node;
  for (int s = 1; s <= 5; ++s) {
    clock_.Advance(Seconds(1));
    Beat(s, "", 0);
  }
  // From now on rank 1 is stopped at step 5; the other rank moves into
  // all-reduce #6 (its last progress, 1 s after rank 1's) and waits there.
  // The timeout runs from the stopped rank's last progress.
  for (int i = 0; i < 29; ++i) {
    clock_.Advance(Seconds(1));
    Beat(6, stuck, 5);
    ASSERT_FALSE(state_->jobs().Find(id)->stopping) << i;
  }
  clock_.Advance(Seconds(1));
  Beat(6, stuck, 5);
  const JobRecord* job = state_->jobs().Find(id);
  ASSERT_TRUE(job->stopping);
  EXPECT_EQ(job->stop_reason, "hang: rank 1 on " + stuck +
                                  " made no progress for 30 s (a process of it is stopped; "
                                  "peers waiting in all-reduce #6)");
  EXPECT_EQ(job->hang.rank, 1);
  EXPECT_DOUBLE_EQ(job->hang.stalled_s, 29);
  EXPECT_EQ(job->hang.node, stuck);
  for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, stuck)) {
    EXPECT_TRUE(d.terminate);
    EXPECT_TRUE(d.capture_stacks);
    EXPECT_EQ(d.kill_after_ms, 15000);
  }
  // The ranks exit; the job is requeued and its next attempt starts.
  clock_.Advance(Seconds(1));
  Beat(6, "", 0);
  job = state_->jobs().Find(id);
  EXPECT_EQ(job->attempt, 2);
  EXPECT_EQ(job->restarts, 1);
  EXPECT_EQ(job->hang.attempt, 1);  // kept for `athanor job` after the restart
  for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, job->allocation[0].node)) {
    EXPECT_FALSE(d.capture_stacks);
  }
  EXPECT_FALSE(state_->nodes().Get(stuck)->drain);

  // A second hang on the same node (within the hour) does not drain it: a
  // stopped process is the job's own doing, not the node's.
  Beat(0, "", 0);
  for (int i = 0; i < 31 && !state_->jobs().Find(id)->stopping; ++i) {
    clock_.Advance(Seconds(1));
    Beat(1, stuck, 0);
  }
  ASSERT_TRUE(state_->jobs().Find(id)->stopping);
  EXPECT_FALSE(state_->nodes().Get(stuck)->drain);
}

// Hangs in a collective count against the suspect's node, once per tenant:
// two hangs of one tenant's jobs leave it up, a second tenant's drains it.
TEST_F(ClusterHangTest, CollectiveHangsOfTwoTenantsDrainTheSuspectsNode) {
  stop_stuck_ = false;
  auto hang = [&](const std::string& tenant) {
    JobSpec spec;
    spec.nodes = 2;
    spec.gpus_per_node = 1;
    spec.tenant = tenant;
    spec.command = {"train"};
    std::string id = state_->SubmitJob(spec)->job_id;
    Beat(0, "", 0);
    EXPECT_EQ(state_->jobs().Find(id)->state, JobState::kRunning);
    // node-b's rank stays at step 5, out of the all-reduce #6 its peer waits in.
    for (int i = 0; i < 40 && !state_->jobs().Find(id)->stopping; ++i) {
      clock_.Advance(Seconds(1));
      Beat(6, "node-b", 5);
    }
    EXPECT_TRUE(state_->jobs().Find(id)->stopping);
    EXPECT_EQ(state_->jobs().Find(id)->hang.node, "node-b");
    Beat(6, "", 0);  // its ranks exit
    EXPECT_EQ(state_->jobs().Find(id)->state, JobState::kFailed);
  };
  hang("t1");
  hang("t1");
  EXPECT_FALSE(state_->nodes().Get("node-b")->drain);
  hang("t2");
  std::optional<NodeRecord> drained = state_->nodes().Get("node-b");
  EXPECT_TRUE(drained->drain);
  EXPECT_EQ(drained->reason.rfind(
                "auto-drained: suspect in hangs of 2 tenants' jobs within 3600 s; last: hang: rank ", 0),
            0u)
      << drained->reason;
  EXPECT_NE(drained->reason.find(" on node-b made no progress for "), std::string::npos) << drained->reason;
  EXPECT_FALSE(state_->nodes().Get("node-a")->drain);
}

// A job that asked to move off stragglers: once a rank is flagged, the
// attempt stops as a preemption (restarts untouched) and the next attempt is
// placed without that node; where no other node could host it, it stays.
class StragglerMoveTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> nodes) {
    nodes_ = std::move(nodes);
    StateOptions o;
    o.kill_after_ms = 1000;
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const std::string& name : nodes_) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 1;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
    JobSpec spec;
    spec.nodes = 2;
    spec.gpus_per_node = 1;
    spec.tenant = "t";
    spec.command = {"train"};
    spec.max_restarts = 0;  // a move is not a restart
    spec.move_off_stragglers = true;
    id_ = state_->SubmitJob(spec)->job_id;
  }
  // One heartbeat per node, a second later: every rank finished `step`; the
  // rank on `slow_node` computes 200 ms a step, the others 100 ms.
  void Beat(int64_t step, const std::string& slow_node) {
    clock_.Advance(Seconds(1));
    for (const std::string& node : nodes_) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        RankReport r = ProgressReport(d.job_id, d.attempt, d.rank, step, step);
        r.progress.step_compute_ms = node == slow_node ? 200 : 100;
        if (d.terminate) r.phase = RankPhase::kExited;
        reports.push_back(r);
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
    state_->Tick();
  }
  FakeClock clock_;
  std::vector<std::string> nodes_;
  std::unique_ptr<ClusterState> state_;
  std::string id_;
};

TEST_F(StragglerMoveTest, FlaggedRankMovesTheJobOffItsNode) {
  Start({"node-a", "node-b", "node-c"});
  Beat(0, "");
  const JobRecord* job = state_->jobs().Find(id_);
  ASSERT_EQ(job->state, JobState::kRunning);
  const std::string slow = job->allocation[1].node;
  // Three 10 s windows with rank 1 at 2x: flagged at the end of the third.
  int64_t step = 0;
  for (int i = 0; i < 40 && !state_->jobs().Find(id_)->stopping; ++i) Beat(++step, slow);
  job = state_->jobs().Find(id_);
  ASSERT_TRUE(job->stopping);
  EXPECT_EQ(job->state, JobState::kPreempting);
  EXPECT_EQ(job->stop_reason, "moving off a straggler: rank 1 on " + slow +
                                  " (straggler: compute 2.00x the gang median over 3 windows)");
  EXPECT_EQ(job->avoid_nodes, std::vector<std::string>{slow});
  EXPECT_EQ(state_->jobs().counters().preemptions.at("straggler"), 1);
  // The ranks exit; the next attempt runs on the two other nodes.
  Beat(step, "");
  Beat(0, "");
  job = state_->jobs().Find(id_);
  ASSERT_EQ(job->attempt, 2);
  EXPECT_EQ(job->restarts, 0);
  ASSERT_EQ(job->allocation.size(), 2u);
  for (const RankPlacement& p : job->allocation) EXPECT_NE(p.node, slow);
  EXPECT_EQ(job->avoid_nodes, std::vector<std::string>{slow});  // for every later attempt too
}

TEST_F(StragglerMoveTest, JobStaysWhereNoOtherNodeCouldHostIt) {
  Start({"node-a", "node-b"});
  Beat(0, "");
  const std::string slow = state_->jobs().Find(id_)->allocation[1].node;
  int64_t step = 0;
  for (int i = 0; i < 40; ++i) Beat(++step, slow);
  const JobRecord* job = state_->jobs().Find(id_);
  EXPECT_FALSE(job->stopping);
  EXPECT_EQ(job->state, JobState::kRunning);
  ASSERT_EQ(job->stragglers.size(), 1u);  // still flagged, where it can be seen
  EXPECT_EQ(job->stragglers[0].node, slow);
  EXPECT_TRUE(job->avoid_nodes.empty());
}

}  // namespace
}  // namespace athanor::coord
