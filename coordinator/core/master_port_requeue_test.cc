// A master port taken on rank 0's node (another tenant's process listens
// there; the agent reports master_port_taken) is the platform's fault: the
// attempt is requeued without using a restart, with the range's next port
// and rank 0 on another of its nodes; after kMaxMasterPortRequeues such
// requeues the next one is an ordinary failure. The node is never drained.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

class MasterPortRequeueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StateOptions o;
    o.min_run_time = Duration::zero();
    o.kill_after_ms = 1000;
    o.master_port_min = 30000;
    o.master_port_max = 30001;
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = absl::StrCat("host-", name);
      n.inventory.gpus = 1;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
    JobSpec s;
    s.nodes = 2;
    s.gpus_per_node = 1;
    s.tenant = "victim";
    s.command = {"train"};
    s.max_restarts = 0;
    id_ = state_->SubmitJob(s)->job_id;
  }
  const JobRecord& Job() { return *state_->jobs().Find(id_); }
  std::string Rank0Node() { return Job().allocation[0].node; }
  std::string OtherNode() { return Rank0Node() == "n1" ? "n2" : "n1"; }
  static std::string Taken(int port) {
    return absl::StrCat("cannot serve the attempt's rendezvous: master port ", port, " is in use on this node");
  }
  void Beat(const std::string& node, std::vector<RankReport> reports) {
    ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
  }
  RankReport Report(int rank, RankPhase phase) {
    RankReport r;
    r.job_id = id_;
    r.attempt = Job().attempt;
    r.rank = rank;
    r.phase = phase;
    return r;
  }
  // Rank 0 fails to start with the port taken; rank 1 runs, then is stopped.
  void Squatted() {
    const std::string rank0 = Rank0Node(), other = OtherNode();
    RankReport r0 = Report(0, RankPhase::kFailedToStart);
    r0.exit_code = 127;
    r0.message = Taken(Job().master_port);
    r0.master_port_taken = true;
    Beat(other, {Report(1, RankPhase::kRunning)});
    Beat(rank0, {r0});
    ASSERT_TRUE(Job().stopping);
    RankReport r1 = Report(1, RankPhase::kExited);
    r1.exit_code = 143;
    r1.signal = 15;
    r1.signal_from_agent = true;
    Beat(other, {r1});
  }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
  std::string id_;
};

TEST_F(MasterPortRequeueTest, RequeuedWithoutARestartOnANewPortWithRankZeroElsewhereThenBounded) {
  ASSERT_EQ(Job().attempt, 1);
  ASSERT_EQ(Rank0Node(), "n1");
  EXPECT_EQ(Job().master_port, 30000);
  // Rank 0 fails to start on n1: the attempt stops like a preemption.
  RankReport r0 = Report(0, RankPhase::kFailedToStart);
  r0.exit_code = 127;
  r0.message = Taken(30000);
  r0.master_port_taken = true;
  Beat("n2", {Report(1, RankPhase::kRunning)});
  Beat("n1", {r0});
  const std::string why1 = absl::StrCat(
      "another process holds the master port on node n1: requeued with another port and rank 0 elsewhere "
      "where it can be, using no restart (1 of 3): rank 0 on node n1 exited with code 127: ", Taken(30000));
  EXPECT_EQ(Job().state, JobState::kPreempting);
  EXPECT_EQ(Job().stop_reason, why1);
  std::vector<DesiredRank> n2 = ClusterAgents::DesiredFor(*state_, "n2");
  ASSERT_EQ(n2.size(), 1u);
  EXPECT_TRUE(n2[0].terminate);
  EXPECT_EQ(n2[0].kill_after_ms, 1000);
  RankReport r1 = Report(1, RankPhase::kExited);
  r1.exit_code = 143;
  r1.signal = 15;
  r1.signal_from_agent = true;
  Beat("n2", {r1});
  // Requeued and placed again at once: next port, rank 0 on n2, no restart used.
  EXPECT_EQ(Job().state, JobState::kStarting);
  EXPECT_EQ(Job().attempt, 2);
  EXPECT_EQ(Job().restarts, 0);
  EXPECT_EQ(Job().master_port_taken_on, std::vector<std::string>{"n1"});
  EXPECT_EQ(Rank0Node(), "n2");
  EXPECT_EQ(Job().allocation[1].node, "n1");
  EXPECT_EQ(Job().master_addr, "host-n2");
  EXPECT_EQ(Job().master_port, 30001);
  ASSERT_EQ(Job().attempt_spans.size(), 2u);
  EXPECT_EQ(Job().attempt_spans[0].outcome, "preempted");
  EXPECT_EQ(Job().attempt_spans[0].reason, why1);
  EXPECT_EQ(state_->jobs().counters().preemptions.at("master_port"), 1);
  // Taken there too (2 of 3), and with both nodes listed rank 0 stays
  // where the scheduler put it (3 of 3).
  Squatted();
  EXPECT_EQ(Job().attempt, 3);
  EXPECT_EQ(Job().master_port_taken_on, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(Rank0Node(), "n1");
  EXPECT_EQ(Job().master_port, 30000);
  Squatted();
  EXPECT_EQ(Job().attempt, 4);
  EXPECT_EQ(Job().restarts, 0);
  EXPECT_EQ(Job().master_port_taken_on, (std::vector<std::string>{"n1", "n2", "n1"}));
  EXPECT_EQ(Job().master_port, 30001);
  // The fourth is an ordinary failure: no restarts left, FAILED.
  Squatted();
  EXPECT_EQ(Job().state, JobState::kFailed);
  EXPECT_EQ(Job().attempt, 4);
  EXPECT_EQ(Job().restarts, 0);
  EXPECT_EQ(Job().reason,
            absl::StrCat("rank 0 on node n1 exited with code 127: ", Taken(30001),
                         " (the job was requeued 3 times already for a taken master port, the most without "
                         "using a restart)"));
  EXPECT_EQ(state_->jobs().counters().preemptions.at("master_port"), 3);
  // Nothing counted against either node.
  for (const char* node : {"n1", "n2"}) {
    std::optional<NodeRecord> n = state_->nodes().Get(node);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->state, NodeState::kUp) << node;
    EXPECT_FALSE(n->drain) << node;
  }
}

TEST_F(MasterPortRequeueTest, TheClaimFromANodeOtherThanRankZerosIsAPlainFailure) {
  RankReport r1 = Report(1, RankPhase::kFailedToStart);
  r1.exit_code = 127;
  r1.message = Taken(30000);
  r1.master_port_taken = true;  // rank 1's node does not bind the port
  Beat("n2", {r1});
  EXPECT_TRUE(Job().stopping);
  EXPECT_EQ(Job().stop_outcome, JobState::kFailed);
  EXPECT_EQ(Job().stop_reason, absl::StrCat("rank 1 on node n2 exited with code 127: ", Taken(30000)));
  EXPECT_TRUE(Job().master_port_taken_on.empty());
}

}  // namespace
}  // namespace athanor::coord
