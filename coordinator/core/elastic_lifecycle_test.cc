// Elastic jobs in ClusterState, driven by a FakeClock and simulated agents: a
// lost or drained node shrinks the job (requeued at once, no restart used,
// the survivors placed again with the new world size) while its least remain;
// below that it fails as a fixed gang would; at a committed checkpoint it
// grows back onto free nodes, but not while another job waits for them.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "coordinator/core/attempt_spans.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"

namespace athanor::coord {
namespace {

class ElasticLifecycleTest : public ::testing::Test {
 protected:
  ElasticLifecycleTest() {
    StateOptions o;
    o.min_run_time = Duration::zero();
    o.kill_after_ms = 1000;
    o.heartbeat_timeout = Seconds(10);
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2", "n3"}) Register(name);
  }
  void Register(const std::string& name) {
    NodeRecord n;
    n.name = name;
    n.host = name;
    n.inventory.gpus = 1;
    ASSERT_TRUE(state_->agents().Register(n, {}).ok());
  }
  static JobSpec Elastic(int min_nodes, int nodes, const std::string& tenant = "t") {
    JobSpec s;
    s.nodes = nodes;
    s.min_nodes = min_nodes;
    s.gpus_per_node = 1;
    s.tenant = tenant;
    s.command = {"train"};
    s.global_batch = 6;
    return s;
  }
  // Each listed node reports its desired ranks: running, or exited (143)
  // where the coordinator asked them to terminate.
  void Heartbeat(const std::vector<std::string>& nodes) {
    for (const std::string& node : nodes) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        reports.push_back(d.terminate ? ReportOf(d, RankPhase::kExited, 143, 15) : ReportOf(d));
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
  }
  // The nodes of the job's current attempt, and the world size its ranks see.
  std::set<std::string> NodesOf(const std::string& id) {
    std::set<std::string> out;
    for (const RankPlacement& p : Job(id).allocation) out.insert(p.node);
    return out;
  }
  std::string EnvOf(const std::string& id, const std::string& node, const std::string& key) {
    for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
      if (d.job_id == id) return d.env.at(key);
    }
    return "(no rank)";
  }
  void Telemetry(const std::string& id, int64_t step) {
    TelemetryFigures f;
    f.step = step;
    f.attempt = Job(id).attempt;
    ASSERT_TRUE(state_->jobs().RecordTelemetry(id, f).ok());
  }
  const JobRecord& Job(const std::string& id) { return *state_->jobs().Find(id); }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ElasticLifecycleTest, ShrinksOnALostNodeAndGrowsBackAtACheckpoint) {
  const std::string id = state_->SubmitJob(Elastic(2, 3))->job_id;
  Heartbeat({"n1", "n2", "n3"});
  ASSERT_EQ(Job(id).state, JobState::kRunning);
  EXPECT_EQ(NodesOf(id), (std::set<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(EnvOf(id, "n1", "WORLD_SIZE"), "3");
  EXPECT_EQ(EnvOf(id, "n1", "ATHANOR_GLOBAL_BATCH"), "6");
  Telemetry(id, 7);
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 5, 0).ok());
  EXPECT_FALSE(Job(id).stopping);  // at its most already

  // n3 goes silent: DOWN after 10 s. The job shrinks rather than failing.
  clock_.Advance(Seconds(6));
  Heartbeat({"n1", "n2"});
  clock_.Advance(Seconds(5));
  state_->Tick();
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_resize, "shrunk");
  Heartbeat({"n1", "n2"});  // the survivors' ranks end
  EXPECT_EQ(Job(id).attempt, 2);
  EXPECT_EQ(Job(id).state, JobState::kStarting);
  EXPECT_EQ(Job(id).restarts, 0);  // no restart used (max_restarts is 0)
  EXPECT_EQ(NodesOf(id), (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(EnvOf(id, "n2", "WORLD_SIZE"), "2");
  EXPECT_EQ(EnvOf(id, "n2", "ATHANOR_GLOBAL_BATCH"), "6");
  const AttemptSpan& first = Job(id).attempt_spans[0];
  EXPECT_EQ(first.outcome, "shrunk");
  EXPECT_EQ(first.reason, "shrunk: node n3 went DOWN (no heartbeat for 11 s)");
  EXPECT_EQ(first.steps_lost, 3);  // checkpoint 5 resumes at step 5: steps 5, 6 and 7 run again
  EXPECT_TRUE(first.platform_fault);
  EXPECT_EQ(Job(id).usage.back().gpus, 2);
  Heartbeat({"n1", "n2"});
  ASSERT_EQ(Job(id).state, JobState::kRunning);

  // A checkpoint while nothing is free: no growth.
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 8, 0).ok());
  EXPECT_FALSE(Job(id).stopping);
  // n3 comes back; the next checkpoint grows the job onto it.
  Register("n3");
  Heartbeat({"n3"});
  Telemetry(id, 9);  // rank 0 finished step 9: checkpoint 10 resumes right after it
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 10, 0).ok());
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_resize, "grown");
  EXPECT_EQ(Job(id).stop_reason, "grown at checkpoint step 10: 1 more node(s) free (2 -> 3 of at most 3)");
  Heartbeat({"n1", "n2"});
  EXPECT_EQ(Job(id).attempt, 3);
  EXPECT_EQ(NodesOf(id), (std::set<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(EnvOf(id, "n3", "WORLD_SIZE"), "3");
  EXPECT_EQ(Job(id).attempt_spans[1].outcome, "grown");
  EXPECT_EQ(Job(id).attempt_spans[1].steps_lost, 0);

  // A drain shrinks it again. A checkpoint that commits once attempt 4 runs
  // is not credited: attempt 4 may have read checkpoint 10 already.
  Telemetry(id, 12);
  ASSERT_TRUE(state_->admin().DrainNode("n3", Seconds(5), "maintenance").ok());
  ASSERT_TRUE(Job(id).stopping);
  Heartbeat({"n1", "n2", "n3"});
  EXPECT_EQ(Job(id).attempt, 4);
  EXPECT_EQ(Job(id).attempt_spans[2].outcome, "shrunk");
  EXPECT_EQ(Job(id).attempt_spans[2].steps_lost, 3);  // steps 10, 11 and 12 after checkpoint 10
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 11, 0).ok());
  EXPECT_EQ(Job(id).attempt_spans[2].steps_lost, 3);
  EXPECT_FALSE(Job(id).attempt_spans[1].platform_fault);
  EXPECT_EQ(Job(id).restarts, 0);
}

// The checkpoint a resized attempt's ranks save on SIGTERM commits after the
// attempt ended; while the job waits to be placed again, it is what the next
// attempt resumes from, and the span's steps_lost shrinks by what it gained.
TEST(CreditLateCheckpointTest, CreditsACommitWhileTheJobWaits) {
  JobRecord job;
  job.attempt = 2;
  job.attempt_spans = {AttemptSpan{}, AttemptSpan{}};
  job.attempt_spans[1].end = 100;
  job.attempt_spans[1].outcome = "grown";
  job.attempt_spans[1].steps_lost = 9;  // step 18 reported, checkpoint 10 committed
  job.committed_step = 16;
  CreditLateCheckpoint(&job, 10);
  EXPECT_EQ(job.attempt_spans[1].steps_lost, 3);
  job.committed_step = 19;  // past the last step reported: nothing was lost
  CreditLateCheckpoint(&job, 16);
  EXPECT_EQ(job.attempt_spans[1].steps_lost, 0);

  job.attempt_spans[1].steps_lost = 9;
  job.allocated = true;  // placed already: not credited
  CreditLateCheckpoint(&job, 10);
  EXPECT_EQ(job.attempt_spans[1].steps_lost, 9);
  job.allocated = false;
  job.attempt_spans[1].outcome = "preempted";  // not a resize
  CreditLateCheckpoint(&job, 10);
  EXPECT_EQ(job.attempt_spans[1].steps_lost, 9);
}

// A lost node's peers usually see it gone first: their collectives fail and
// they exit while the heartbeat timeout still runs. The attempt stops on
// that failure but cannot settle (the lost node's rank never reports); when
// the DOWN comes it shrinks as if the DOWN had come first: no restart used.
TEST_F(ElasticLifecycleTest, ShrinksWhenTheSurvivorsFailBeforeTheLostNodeIsDown) {
  const std::string id = state_->SubmitJob(Elastic(2, 3))->job_id;
  Heartbeat({"n1", "n2", "n3"});
  ASSERT_EQ(Job(id).state, JobState::kRunning);
  clock_.Advance(Seconds(6));
  for (const std::string node : {"n1", "n2"}) {
    std::vector<RankReport> reports;
    for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
      reports.push_back(ReportOf(d, RankPhase::kExited, 1));
    }
    ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
  }
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_outcome, JobState::kFailed);  // no restarts: FAILED, had it settled
  EXPECT_EQ(Job(id).attempt, 1);
  clock_.Advance(Seconds(5));
  state_->Tick();  // n3 DOWN
  Heartbeat({"n1", "n2"});
  EXPECT_EQ(Job(id).attempt, 2);
  EXPECT_EQ(Job(id).restarts, 0);
  EXPECT_EQ(NodesOf(id), (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(EnvOf(id, "n1", "WORLD_SIZE"), "2");
  const AttemptSpan& first = Job(id).attempt_spans[0];
  EXPECT_EQ(first.outcome, "shrunk");
  EXPECT_TRUE(first.platform_fault);
  EXPECT_EQ(first.reason.rfind("shrunk: node n3 went DOWN (no heartbeat for 11 s) (first: rank ", 0), 0u)
      << first.reason;

  // Below its least, the same failure stays one: FAILED (no restarts).
  Heartbeat({"n1", "n2"});
  ASSERT_EQ(Job(id).state, JobState::kRunning);
  clock_.Advance(Seconds(6));
  std::vector<RankReport> reports;
  for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, "n1")) {
    reports.push_back(ReportOf(d, RankPhase::kExited, 1));
  }
  ASSERT_TRUE(state_->agents().Heartbeat("n1", state_->log().generation(), reports));
  clock_.Advance(Seconds(5));
  state_->Tick();  // n2 DOWN
  EXPECT_EQ(Job(id).state, JobState::kFailed);
  EXPECT_EQ(Job(id).attempt_spans[1].outcome, "failed");
}

TEST_F(ElasticLifecycleTest, NeverRunsBelowItsLeast) {
  const std::string id = state_->SubmitJob(Elastic(2, 3))->job_id;
  Heartbeat({"n1", "n2", "n3"});
  // A drain shrinks it too, with the job's grace to checkpoint.
  ASSERT_TRUE(state_->admin().DrainNode("n3", Seconds(5), "maintenance").ok());
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_resize, "shrunk");
  Heartbeat({"n1", "n2", "n3"});
  EXPECT_EQ(Job(id).attempt, 2);
  EXPECT_EQ(NodesOf(id), (std::set<std::string>{"n1", "n2"}));
  Heartbeat({"n1", "n2"});
  // Losing one of the two left would go below 2: the attempt fails as a
  // fixed gang's would (no restarts left: FAILED).
  clock_.Advance(Seconds(6));
  Heartbeat({"n1"});
  clock_.Advance(Seconds(5));
  state_->Tick();
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_resize, "");
  Heartbeat({"n1"});
  EXPECT_EQ(Job(id).state, JobState::kFailed);
  EXPECT_EQ(Job(id).reason, "node n2 went DOWN (no heartbeat for 11 s)");
  EXPECT_EQ(Job(id).attempt_spans[1].outcome, "failed");
}

TEST_F(ElasticLifecycleTest, DoesNotGrowWhileAnotherJobWaits) {
  JobSpec one = Elastic(1, 1);
  one.global_batch = 0;
  const std::string other = state_->SubmitJob(one)->job_id;  // takes a node first
  const std::string id = state_->SubmitJob(Elastic(2, 3))->job_id;
  Heartbeat({"n1", "n2", "n3"});
  ASSERT_EQ(Job(id).state, JobState::kRunning);
  EXPECT_EQ(NodesOf(id).size(), 2u);  // started below its most
  JobSpec pair = Elastic(2, 2);
  pair.global_batch = 0;
  const std::string waiting = state_->SubmitJob(pair)->job_id;
  ASSERT_EQ(Job(waiting).state, JobState::kPending);
  // `other` ends: its node is free, but the pending pair has the better claim.
  ASSERT_TRUE(state_->CancelJob(other).ok());
  Heartbeat({"n1", "n2", "n3"});
  ASSERT_EQ(Job(other).state, JobState::kCancelled);
  ASSERT_EQ(Job(waiting).state, JobState::kPending);
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 3, 0).ok());
  EXPECT_FALSE(Job(id).stopping);
  // Once nothing waits, the next checkpoint grows it.
  ASSERT_TRUE(state_->CancelJob(waiting).ok());
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(id, 4, 0).ok());
  ASSERT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_resize, "grown");
  Heartbeat({"n1", "n2", "n3"});
  EXPECT_EQ(NodesOf(id).size(), 3u);
  EXPECT_EQ(Job(id).attempt, 2);
}

}  // namespace
}  // namespace athanor::coord
