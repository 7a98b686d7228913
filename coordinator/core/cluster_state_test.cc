#include "coordinator/core/cluster_state.h"

#include <gtest/gtest.h>

namespace athanor::coord {
namespace {

class ClusterStateTest : public ::testing::Test {
 protected:
  ClusterStateTest() : state_(Options(), &clock_) {
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = std::string("host-") + name;
      n.agent_address = "127.0.0.1:1";
      n.inventory.gpus = 2;
      EXPECT_TRUE(state_.agents().Register(n, {}).ok());
    }
  }
  static StateOptions Options() {
    StateOptions o;
    o.heartbeat_timeout = Seconds(10);
    o.master_port_min = 30000;
    o.master_port_max = 30001;
    o.kill_after_ms = 1234;
    o.coordinator_address = "coord:7700";
    return o;
  }
  static JobSpec Spec(int nodes, int gpus, int max_restarts = 0) {
    JobSpec s;
    s.nodes = nodes;
    s.gpus_per_node = gpus;
    s.command = {"train"};
    s.max_restarts = max_restarts;
    return s;
  }
  static RankReport Report(const std::string& job, int attempt, int rank, RankPhase phase,
                           int code = 0) {
    RankReport r;
    r.job_id = job;
    r.attempt = attempt;
    r.rank = rank;
    r.phase = phase;
    r.exit_code = code;
    return r;
  }
  // Every rank of the job's attempt on `node`, as its agent would report it.
  void HeartbeatAll(const std::string& node, std::vector<RankReport> reports) {
    EXPECT_TRUE(state_.agents().Heartbeat(node, state_.log().generation(), reports));
  }

  FakeClock clock_;
  ClusterState state_;
};

TEST_F(ClusterStateTest, PlacesGangAndBuildsEnvContract) {
  absl::StatusOr<SubmitResult> id = state_.SubmitJob(Spec(2, 2));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id, "1");
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kStarting);
  EXPECT_EQ(job->attempt, 1);
  EXPECT_EQ(job->master_addr, "host-n1");
  EXPECT_EQ(job->master_port, 30000);
  std::vector<DesiredRank> n2 = ClusterAgents::DesiredFor(state_, "n2");
  ASSERT_EQ(n2.size(), 2u);
  EXPECT_EQ(n2[1].rank, 3);
  EXPECT_EQ(n2[1].env.at("RANK"), "3");
  EXPECT_EQ(n2[1].env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(n2[1].env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(n2[1].env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(n2[1].env.at("NODE_RANK"), "1");
  EXPECT_EQ(n2[1].env.at("MASTER_ADDR"), "host-n1");
  EXPECT_EQ(n2[1].env.at("MASTER_PORT"), "30000");
  EXPECT_EQ(n2[1].env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(n2[1].env.at("ATHANOR_JOB_ID"), "1");
  EXPECT_EQ(n2[1].env.at("ATHANOR_ATTEMPT"), "1");
  EXPECT_EQ(n2[1].env.at("ATHANOR_COORDINATOR"), "coord:7700");
  EXPECT_FALSE(n2[1].terminate);
  Changes c = state_.TakeChanges();
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].state, JobState::kStarting);  // the placement is persisted
}

TEST_F(ClusterStateTest, MasterPortsAreSharedOnlyWhenEveryPortIsTaken) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  std::vector<int32_t> ports;
  for (const char* id : {"1", "2", "3", "4"}) ports.push_back(state_.jobs().Find(id)->master_port);
  EXPECT_EQ(ports, (std::vector<int32_t>{30000, 30001, 30000, 30000}));
  // Job 2 ends: its port is free again, and the next attempt takes it.
  ASSERT_TRUE(state_.CancelJob("2").ok());
  const std::string node = state_.jobs().Find("2")->allocation[0].node;
  std::vector<RankReport> reports;
  for (const char* id : {"1", "2", "3", "4"}) {
    if (state_.jobs().Find(id)->allocation[0].node != node) continue;
    bool cancelled = std::string(id) == "2";
    reports.push_back(Report(id, 1, 0, cancelled ? RankPhase::kExited : RankPhase::kRunning, cancelled ? 143 : 0));
  }
  HeartbeatAll(node, reports);
  ASSERT_EQ(state_.jobs().Find("2")->state, JobState::kCancelled);
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  EXPECT_EQ(state_.jobs().Find("5")->master_port, 30001);
}

TEST_F(ClusterStateTest, ASharedPortStaysTakenUntilItsLastHolderEnds) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  // Jobs 1, 3 and 4 share 30000; job 2 holds 30001.
  auto end = [&](const std::string& ended) {
    ASSERT_TRUE(state_.CancelJob(ended).ok());
    const std::string node = state_.jobs().Find(ended)->allocation[0].node;
    std::vector<RankReport> reports;
    for (const char* id : {"1", "2", "3", "4", "5"}) {
      const JobRecord* job = state_.jobs().Find(id);
      if (job == nullptr || !job->allocated || job->allocation[0].node != node) continue;
      const bool gone = id == ended;
      reports.push_back(
          Report(id, 1, 0, gone ? RankPhase::kExited : RankPhase::kRunning, gone ? 143 : 0));
    }
    HeartbeatAll(node, reports);
    ASSERT_EQ(state_.jobs().Find(ended)->state, JobState::kCancelled);
  };
  end("2");  // 30001 is free again
  end("3");  // 30000 is still held by jobs 1 and 4
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  EXPECT_EQ(state_.jobs().Find("5")->master_port, 30001);
  end("4");
  end("1");  // the last holder of 30000: free again
  end("5");
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  // The cursor moves on from the last port chosen (30001), wrapping round.
  EXPECT_EQ(state_.jobs().Find("6")->master_port, 30000);
  EXPECT_EQ(state_.jobs().Find("7")->master_port, 30001);
}

TEST_F(ClusterStateTest, AllExitZeroSucceeds) {
  ASSERT_TRUE(state_.SubmitJob(Spec(2, 2)).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning), Report("1", 1, 1, RankPhase::kRunning)});
  HeartbeatAll("n2", {Report("1", 1, 2, RankPhase::kRunning), Report("1", 1, 3, RankPhase::kRunning)});
  EXPECT_EQ(state_.jobs().Find("1")->state, JobState::kRunning);
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kExited), Report("1", 1, 1, RankPhase::kExited)});
  EXPECT_EQ(state_.jobs().Find("1")->state, JobState::kRunning);
  HeartbeatAll("n2", {Report("1", 1, 2, RankPhase::kExited), Report("1", 1, 3, RankPhase::kExited)});
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kSucceeded);
  EXPECT_FALSE(job->allocated);
  EXPECT_TRUE(ClusterAgents::DesiredFor(state_, "n1").empty());
  EXPECT_EQ(job->ranks[3].exited, true);
  EXPECT_EQ(job->ranks[3].exit_code, 0);
}

TEST_F(ClusterStateTest, NonZeroExitTerminatesOthersThenFails) {
  ASSERT_TRUE(state_.SubmitJob(Spec(2, 2)).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning), Report("1", 1, 1, RankPhase::kExited, 3)});
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_TRUE(job->stopping);
  EXPECT_EQ(job->state, JobState::kStarting);
  std::vector<DesiredRank> d = ClusterAgents::DesiredFor(state_, "n2");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE(d[0].terminate);
  EXPECT_EQ(d[0].kill_after_ms, 1234);
  // n1 still runs rank 0; n2 acknowledged the stop and runs nothing.
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning), Report("1", 1, 1, RankPhase::kExited, 3)});
  HeartbeatAll("n2", {});
  EXPECT_TRUE(state_.jobs().Find("1")->stopping);
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kExited, 143)});
  job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->reason, "rank 1 on node n1 exited with code 3");
  EXPECT_EQ(job->ranks[1].exit_code, 3);
  EXPECT_EQ(job->ranks[0].exit_code, 143);
  EXPECT_FALSE(job->allocated);
  EXPECT_TRUE(ClusterAgents::DesiredFor(state_, "n1").empty());
}

// Rank 1 is SIGKILLed; rank 0 exits on its dead peer, and its node reports
// first. Once rank 1's node reports it killed by a signal the agent did not
// send, the reason names rank 1; a rank the agent's stop killed is not blamed.
TEST_F(ClusterStateTest, ARankKilledByASignalIsBlamedOverOneThatExitedOnItsDeadPeer) {
  for (bool from_agent : {false, true}) {
    SCOPED_TRACE(from_agent);
    ASSERT_TRUE(state_.SubmitJob(Spec(2, 1)).ok());
    const std::string id = from_agent ? "2" : "1";
    const JobRecord* job = state_.jobs().Find(id);
    const std::string n0 = job->allocation[0].node, n1 = job->allocation[1].node;
    HeartbeatAll(n0, {Report(id, 1, 0, RankPhase::kRunning)});
    HeartbeatAll(n1, {Report(id, 1, 1, RankPhase::kRunning)});
    HeartbeatAll(n0, {Report(id, 1, 0, RankPhase::kExited, 1)});
    job = state_.jobs().Find(id);
    EXPECT_TRUE(job->stopping);
    EXPECT_EQ(job->stop_reason, "rank 0 on node " + n0 + " exited with code 1");
    RankReport killed = Report(id, 1, 1, RankPhase::kExited, 137);
    killed.signal = 9;
    killed.signal_from_agent = from_agent;
    HeartbeatAll(n1, {killed});
    HeartbeatAll(n1, {});
    job = state_.jobs().Find(id);
    EXPECT_EQ(job->state, JobState::kFailed);
    EXPECT_EQ(job->reason, from_agent
                               ? "rank 0 on node " + n0 + " exited with code 1"
                               : "rank 1 on node " + n1 + " was killed by signal 9 (exit code 137)");
  }
}

// Both in one report: the one killed by a signal is named.
TEST_F(ClusterStateTest, OfRanksFailedTogetherTheOneKilledByASignalIsNamed) {
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 2)).ok());
  const std::string node = state_.jobs().Find("1")->allocation[0].node;
  RankReport killed = Report("1", 1, 1, RankPhase::kExited, 137);
  killed.signal = 9;
  HeartbeatAll(node, {Report("1", 1, 0, RankPhase::kExited, 1), killed});
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->reason, "rank 1 on node " + node + " was killed by signal 9 (exit code 137)");
}

TEST_F(ClusterStateTest, RequeuesWhileRestartsRemain) {
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 2, /*max_restarts=*/1)).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kExited, 1), Report("1", 1, 1, RankPhase::kExited, 0)});
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kStarting);  // requeued and placed again at once
  EXPECT_EQ(job->attempt, 2);
  EXPECT_EQ(job->restarts, 1);
  EXPECT_EQ(job->master_port, 30001);  // a new port per attempt
  std::vector<DesiredRank> d = ClusterAgents::DesiredFor(state_, job->allocation[0].node);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].attempt, 2);
  EXPECT_EQ(d[0].env.at("ATHANOR_ATTEMPT"), "2");
  // A stale report of attempt 1 changes nothing.
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kExited, 1)});
  EXPECT_EQ(state_.jobs().Find("1")->attempt, 2);
  HeartbeatAll(job->allocation[0].node,
               {Report("1", 2, 0, RankPhase::kExited, 2), Report("1", 2, 1, RankPhase::kExited, 0)});
  job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->restarts, 1);
  EXPECT_EQ(job->reason, "rank 0 on node " + job->allocation[0].node + " exited with code 2");
  // Each attempt's span says how it ended.
  ASSERT_EQ(job->attempt_spans.size(), 2u);
  EXPECT_EQ(job->attempt_spans[0].outcome, "restarted");
  EXPECT_EQ(job->attempt_spans[0].reason, "rank 0 on node n1 exited with code 1");
  EXPECT_GT(job->attempt_spans[0].start, 0);
  EXPECT_GE(job->attempt_spans[0].end, job->attempt_spans[0].start);
  EXPECT_EQ(job->attempt_spans[1].outcome, "failed");
  EXPECT_EQ(job->attempt_spans[1].reason, job->reason);
}

TEST_F(ClusterStateTest, HeartbeatTimeoutMarksDownAndFailsAttempt) {
  ASSERT_TRUE(state_.SubmitJob(Spec(2, 1)).ok());
  clock_.Advance(Seconds(6));
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning)});
  clock_.Advance(Seconds(5));  // n2 silent for 11 s, n1 for 5 s
  state_.Tick();
  EXPECT_EQ(state_.nodes().Get("n2")->state, NodeState::kDown);
  EXPECT_EQ(state_.nodes().Get("n1")->state, NodeState::kUp);
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_TRUE(job->stopping);
  EXPECT_EQ(job->stop_reason, "node n2 went DOWN (no heartbeat for 11 s)");
  HeartbeatAll("n1", {});  // rank 0 is gone from n1
  job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->reason, "node n2 went DOWN (no heartbeat for 11 s)");
  Changes c = state_.TakeChanges();
  bool node_persisted = false;
  for (const NodeRecord& n : c.nodes) node_persisted |= n.name == "n2" && n.state == NodeState::kDown;
  EXPECT_TRUE(node_persisted);
}

TEST_F(ClusterStateTest, RefusesJobsThatCanNeverFitAndBadSpecs) {
  absl::StatusOr<SubmitResult> r = state_.SubmitJob(Spec(1, 3));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job can never fit: it needs 1 node with 3 free GPUs; only 0 node(s) in the inventory "
            "qualify");
  JobSpec empty = Spec(1, 1);
  empty.command.clear();
  EXPECT_EQ(state_.SubmitJob(empty).status().message(), "spec.command: must not be empty");
  EXPECT_EQ(state_.SubmitJob(Spec(-1, 1)).status().message(), "spec.nodes: must be >= 1, got -1");
  JobSpec big = Spec(1, 1);
  big.name = std::string(5000, 'x');
  EXPECT_EQ(state_.SubmitJob(big).status().message(),
            "spec.name: is 5000 bytes; at most 4096 allowed");
  EXPECT_TRUE(ListJobs(state_.jobs(), true).empty());
}

TEST_F(ClusterStateTest, CancelStopsRunningJob) {
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  ASSERT_TRUE(state_.CancelJob("1").ok());
  EXPECT_TRUE(ClusterAgents::DesiredFor(state_, "n1")[0].terminate);
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kExited, 143)});
  EXPECT_EQ(state_.jobs().Find("1")->state, JobState::kCancelled);
  EXPECT_EQ(state_.CancelJob("99").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterStateTest, RestoreKeepsRunningAttemptAndReconcilesOnRegister) {
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 2)).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning), Report("1", 1, 1, RankPhase::kRunning)});
  std::vector<JobRecord> jobs = ListJobs(state_.jobs(), true);
  std::vector<NodeRecord> nodes;
  for (const NodeView& v : state_.nodes().Views()) nodes.push_back(v.record);

  ClusterState restarted(Options(), &clock_);
  restarted.Restore(jobs, nodes);
  EXPECT_EQ(restarted.nodes().Get("n1")->state, NodeState::kUnknown);
  EXPECT_FALSE(restarted.agents().Heartbeat("n1", 0, {}));  // must re-register first
  NodeRecord n1 = *restarted.nodes().Get("n1");
  ASSERT_TRUE(restarted.agents().Register(n1, {Report("1", 1, 0, RankPhase::kRunning),
                                          Report("1", 1, 1, RankPhase::kExited, 0)}).ok());
  EXPECT_EQ(restarted.jobs().Find("1")->state, JobState::kRunning);
  EXPECT_FALSE(restarted.jobs().Find("1")->stopping);
  EXPECT_TRUE(restarted.agents().Heartbeat("n1", restarted.log().generation(),
                                           {Report("1", 1, 0, RankPhase::kExited, 0)}));
  EXPECT_EQ(restarted.jobs().Find("1")->state, JobState::kSucceeded);
  EXPECT_EQ(restarted.jobs().Find("1")->attempt, 1);
}

// After a restart the minimum run time still counts from the attempt's
// placement, not from its start time truncated to whole seconds.
TEST_F(ClusterStateTest, RestoredAttemptKeepsItsExactStartForTheMinimumRunTime) {
  clock_.Advance(Millis(600));
  JobSpec low = Spec(2, 2);
  low.preemptible = true;
  ASSERT_TRUE(state_.SubmitJob(low).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning), Report("1", 1, 1, RankPhase::kRunning)});
  HeartbeatAll("n2", {Report("1", 1, 2, RankPhase::kRunning), Report("1", 1, 3, RankPhase::kRunning)});
  std::vector<JobRecord> jobs = ListJobs(state_.jobs(), true);
  std::vector<NodeRecord> nodes;
  for (const NodeView& v : state_.nodes().Views()) nodes.push_back(v.record);

  clock_.Advance(Seconds(299.9));  // 0.1 s short of the minimum run time (300 s)
  ClusterState restarted(Options(), &clock_);
  restarted.Restore(jobs, nodes);
  for (const NodeRecord& n : nodes) {
    const int first = n.name == "n1" ? 0 : 2;
    ASSERT_TRUE(restarted.agents().Register(n, {Report("1", 1, first, RankPhase::kRunning),
                                           Report("1", 1, first + 1, RankPhase::kRunning)}).ok());
  }
  JobSpec high = Spec(1, 2);
  high.priority = 10;
  ASSERT_TRUE(restarted.SubmitJob(high).ok());
  restarted.Schedule();
  EXPECT_FALSE(restarted.jobs().Find("1")->stopping);
  clock_.Advance(Seconds(0.1));
  restarted.Schedule();
  EXPECT_TRUE(restarted.jobs().Find("1")->stopping);
}

TEST_F(ClusterStateTest, RestartedAgentLosesRanks) {
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 1)).ok());
  HeartbeatAll("n1", {Report("1", 1, 0, RankPhase::kRunning)});
  NodeRecord n1 = *state_.nodes().Get("n1");
  ASSERT_TRUE(state_.agents().Register(n1, {}).ok());  // the agent came back empty-handed
  HeartbeatAll("n1", {});
  const JobRecord* job = state_.jobs().Find("1");
  EXPECT_EQ(job->state, JobState::kFailed);
  EXPECT_EQ(job->reason, "rank 0 on node n1 was lost (its agent restarted)");
}

TEST_F(ClusterStateTest, IdempotencyKeyReturnsTheFirstJobAcrossARestart) {
  JobSpec spec = Spec(1, 1);
  spec.tenant = "a";
  absl::StatusOr<SubmitResult> first = state_.SubmitJob(spec, "key-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->job_id, "1");
  EXPECT_FALSE(first->duplicate);
  absl::StatusOr<SubmitResult> again = state_.SubmitJob(spec, "key-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job_id, "1");
  EXPECT_TRUE(again->duplicate);
  JobSpec other = spec;
  other.tenant = "b";  // keys are per tenant
  EXPECT_EQ(state_.SubmitJob(other, "key-1")->job_id, "2");
  EXPECT_EQ(state_.SubmitJob(spec)->job_id, "3");  // no key: always a new job
  EXPECT_EQ(state_.SubmitJob(spec)->job_id, "4");
  EXPECT_EQ(state_.SubmitJob(spec, std::string(129, 'k')).status().message(),
            "idempotency_key: is 129 bytes; at most 128 allowed");
  EXPECT_EQ(state_.SubmitJob(spec, "a b").status().message(),
            "idempotency_key: may hold only printable ASCII");

  Changes c = state_.TakeChanges();
  ClusterState restarted(Options(), &clock_);
  restarted.Restore(c.jobs, c.nodes);
  absl::StatusOr<SubmitResult> after = restarted.SubmitJob(spec, "key-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->job_id, "1");
  EXPECT_TRUE(after->duplicate);
  EXPECT_EQ(restarted.SubmitJob(spec, "key-2")->job_id, "5");
}

// A pending job's time waiting is taken with its record for the store and
// given back on a restore (JobRecord::queued_at_unix): past the age limit
// (12 h) it goes ahead of a higher class, counted from its submission, not
// from the restart.
TEST_F(ClusterStateTest, APendingJobKeepsItsTimeWaitingAcrossARestart) {
  ASSERT_EQ(state_.SubmitJob(Spec(1, 2))->job_id, "1");  // one node each, running
  ASSERT_EQ(state_.SubmitJob(Spec(1, 2))->job_id, "2");
  ASSERT_EQ(state_.SubmitJob(Spec(1, 2))->job_id, "3");  // pending, class 0
  const std::string first_node = state_.jobs().Find("1")->allocation[0].node;
  ASSERT_EQ(state_.jobs().Find("3")->state, JobState::kPending);
  const double submitted = clock_.UnixSeconds();
  clock_.Advance(Seconds(12 * 3600 - 600));
  Changes c = state_.TakeChanges();
  for (const JobRecord& job : c.jobs) {
    EXPECT_EQ(job.queued_at_unix, job.id == "3" ? submitted : 0) << job.id;
  }
  std::vector<NodeRecord> nodes;
  for (const NodeView& v : state_.nodes().Views()) nodes.push_back(v.record);
  ClusterState restarted(Options(), &clock_);
  restarted.Restore(c.jobs, nodes);
  for (const NodeRecord& n : nodes) {
    const std::string job = n.name == first_node ? "1" : "2";
    ASSERT_TRUE(restarted.agents().Register(n, {Report(job, 1, 0, RankPhase::kRunning),
                                                Report(job, 1, 1, RankPhase::kRunning)}).ok());
  }
  JobSpec high = Spec(1, 2);
  high.priority = 5;
  ASSERT_EQ(restarted.SubmitJob(high)->job_id, "4");
  clock_.Advance(Seconds(600));  // job 3 has waited 12 h
  ASSERT_TRUE(restarted.agents().Heartbeat(first_node, restarted.log().generation(),
                                           {Report("1", 1, 0, RankPhase::kExited, 0),
                                            Report("1", 1, 1, RankPhase::kExited, 0)}));
  restarted.Schedule();
  EXPECT_TRUE(restarted.jobs().Find("3")->allocated);  // placed on job 1's node
  EXPECT_EQ(restarted.jobs().Find("3")->allocation[0].node, first_node);
  EXPECT_EQ(restarted.jobs().Find("4")->state, JobState::kPending);
}

TEST_F(ClusterStateTest, TimeFieldsAreCappedAtValidation) {
  JobSpec spec = Spec(1, 1);
  spec.time_limit_s = INT64_MAX;
  EXPECT_EQ(state_.SubmitJob(spec).status().message(),
            "spec.time_limit_s: must be in 0..315360000 (10 years), got 9223372036854775807");
  spec.time_limit_s = 0;
  spec.grace_period_s = int64_t{1} << 62;
  EXPECT_EQ(state_.SubmitJob(spec).status().message(),
            "spec.grace_period_s: must be in 0..315360000 (10 years), got 4611686018427387904");
  spec.grace_period_s = 315360000;  // the cap itself is allowed
  EXPECT_EQ(state_.SubmitJob(spec)->job_id, "1");
  EXPECT_TRUE(ListJobs(state_.jobs(), true).size() == 1);
}

TEST_F(ClusterStateTest, NamesWithControlCharactersAreRefused) {
  JobSpec spec = Spec(1, 1);
  spec.name = "train\x1b[2J";
  EXPECT_EQ(state_.SubmitJob(spec).status().message(),
            "spec.name: holds a control character (0x1b); names are printable text");
  spec.name = "line\nbreak";
  EXPECT_EQ(state_.SubmitJob(spec).status().message(),
            "spec.name: holds a control character (0x0a); names are printable text");
  spec.name = "caf\xc3\xa9 run";  // UTF-8 and spaces are text
  EXPECT_EQ(state_.SubmitJob(spec)->job_id, "1");
}

TEST_F(ClusterStateTest, NodeTableIsTheSchedulersAndGenerationsArePerNode) {
  const uint64_t n1_before = state_.log().NodeGeneration("n1");
  const uint64_t n2_before = state_.log().NodeGeneration("n2");
  ASSERT_TRUE(state_.SubmitJob(Spec(1, 2)).ok());  // fills one node
  const JobRecord* job = state_.jobs().Find("1");
  ASSERT_EQ(job->allocation.size(), 2u);
  const std::string used = job->allocation[0].node;
  const std::string idle = used == "n1" ? "n2" : "n1";
  EXPECT_GT(state_.log().NodeGeneration(used), used == "n1" ? n1_before : n2_before);
  EXPECT_EQ(state_.log().NodeGeneration(idle), idle == "n1" ? n1_before : n2_before);
  std::optional<NodeView> v = state_.nodes().View(used);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->gpus_allocated, 2);
  EXPECT_EQ(v->jobs, (std::vector<std::string>{"1"}));
  ASSERT_TRUE(state_.admin().DrainNode(used, Seconds(5), "maintenance").ok());
  EXPECT_EQ(state_.nodes().Get(used)->state, NodeState::kDraining);
  EXPECT_EQ(state_.nodes().Get(used)->reason, "maintenance");
  EXPECT_TRUE(state_.nodes().Get(used)->drain);
  EXPECT_EQ(state_.jobs().Find("1")->state, JobState::kPreempting);
}

}  // namespace
}  // namespace athanor::coord
