// ClusterState's use of the scheduler core's decisions, driven by a
// FakeClock: preemption (deadline, requeue without consuming restarts),
// quota exactness through preempt/requeue/re-admit, GPU-seconds, and the
// idle reclaim of interactive allocations.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/match.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"

namespace athanor::coord {
namespace {

class PreemptionTest : public ::testing::Test {
 protected:
  void Init(StateOptions o) {
    o.min_run_time = Duration::zero();
    o.kill_after_ms = 1000;
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 2;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
  }
  static JobSpec Spec(int nodes, int gpus, const std::string& tenant = "t") {
    JobSpec s;
    s.nodes = nodes;
    s.gpus_per_node = gpus;
    s.tenant = tenant;
    s.command = {"train"};
    return s;
  }
  // Every desired rank on both nodes reported in `phase` (exit 0).
  void ReportAll(const std::string& job, RankPhase phase, double cpu = -1) {
    for (const char* node : {"n1", "n2"}) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        if (d.job_id != job) continue;
        reports.push_back(ReportOf(d, phase));
        reports.back().cpu_seconds = cpu;
      }
      // Other jobs' ranks keep running.
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        if (d.job_id != job) reports.push_back(ReportOf(d));
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
  }
  const JobRecord& Job(const std::string& id) { return *state_->jobs().Find(id); }
  int32_t InUse(const std::string& tenant) {
    for (const QuotaRow& q : state_->accounts().Quotas()) {
      if (q.tenant == tenant) return q.gpus_in_use;
    }
    return -1;
  }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(PreemptionTest, VictimGetsGraceAsKillDelayAndRequeuesWithoutRestart) {
  Init(StateOptions());
  JobSpec low = Spec(2, 2);
  low.preemptible = true;
  low.grace_period_s = 30;
  low.max_restarts = 0;
  std::string l = state_->SubmitJob(low)->job_id;
  ReportAll(l, RankPhase::kRunning);
  ASSERT_EQ(Job(l).state, JobState::kRunning);
  clock_.Advance(Seconds(5));
  JobSpec high = Spec(1, 2);
  high.priority = 10;
  std::string h = state_->SubmitJob(high)->job_id;
  EXPECT_EQ(Job(l).state, JobState::kPreempting);
  EXPECT_EQ(Job(h).state, JobState::kPending);
  for (const char* node : {"n1", "n2"}) {
    std::vector<DesiredRank> d = ClusterAgents::DesiredFor(*state_, node);
    ASSERT_EQ(d.size(), 2u);
    for (const DesiredRank& r : d) {
      EXPECT_TRUE(r.terminate);
      EXPECT_EQ(r.kill_after_ms, 30000);  // the job's grace, not the 1 s default
    }
  }
  absl::StatusOr<WhyResult> why = state_->Why(l);
  ASSERT_TRUE(why.ok());
  ASSERT_EQ(why->reasons.size(), 2u);
  EXPECT_EQ(why->reasons[0], "stopping: preempted for a higher-priority job");
  EXPECT_EQ(why->reasons[1], "ranks are SIGKILLed at 2023-11-14T22:13:55Z");  // start+5+30
  // The agents SIGKILL at the deadline: exit 137 of a PREEMPTING attempt is
  // its expected end, not a failure.
  clock_.Advance(Seconds(30));
  for (const char* node : {"n1", "n2"}) {
    std::vector<RankReport> reports;
    for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
      reports.push_back(ReportOf(d, RankPhase::kExited, 137, 9));
    }
    ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
  }
  EXPECT_EQ(Job(l).state, JobState::kPending);
  EXPECT_EQ(Job(l).restarts, 0);
  EXPECT_EQ(Job(l).reason, "requeued after attempt 1: preempted for a higher-priority job");
  EXPECT_EQ(Job(h).state, JobState::kStarting);
  ReportAll(h, RankPhase::kRunning);
  clock_.Advance(Seconds(10));
  ReportAll(h, RankPhase::kExited);
  EXPECT_EQ(Job(h).state, JobState::kSucceeded);
  // Capacity is back: the victim's next attempt starts.
  EXPECT_EQ(Job(l).state, JobState::kStarting);
  EXPECT_EQ(Job(l).attempt, 2);
  // Each attempt's nodes are kept (for the logs of earlier attempts).
  ASSERT_EQ(Job(l).attempt_nodes.size(), 2u);
  for (const std::vector<std::string>& nodes : Job(l).attempt_nodes) {
    EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()), (std::set<std::string>{"n1", "n2"}));
    EXPECT_EQ(nodes.size(), 2u);
  }
  EXPECT_EQ(Job(h).attempt_nodes.size(), 1u);
  // GPU-seconds: the victim's 4 GPUs for 35 s, then the winner's 2 for 10 s.
  std::vector<UsageRow> usage = state_->accounts().Usage(state_->jobs().all(), "t", 0);
  ASSERT_EQ(usage.size(), 3u);
  EXPECT_EQ(usage[0].job_id, "");
  EXPECT_DOUBLE_EQ(usage[0].gpu_seconds, 160.0);
  EXPECT_EQ(usage[0].gpus_in_use, 4);
  EXPECT_EQ(usage[1].job_id, l);
  EXPECT_DOUBLE_EQ(usage[1].gpu_seconds, 140.0);
  EXPECT_EQ(usage[1].gpus_in_use, 4);
  EXPECT_EQ(usage[2].job_id, h);
  EXPECT_DOUBLE_EQ(usage[2].gpu_seconds, 20.0);
  // --since: only GPU time after it (the last 12 s: 4 GPUs x 2 s + 2 x 10 s).
  EXPECT_DOUBLE_EQ(state_->accounts().Usage(state_->jobs().all(), "t", clock_.UnixSeconds() - 12)[0].gpu_seconds, 28.0);
}

// A preempted job whose ranks handed off a newer step to the checkpoint
// service restarts only once that step commits, fails, or the wait's bound
// (StateOptions::checkpoint_upload_wait) passes.
class UploadWaitTest : public PreemptionTest {
 protected:
  std::string PreemptAfterHandOff() {
    std::string a = state_->SubmitJob(Spec(2, 2))->job_id;
    ReportAll(a, RankPhase::kRunning);
    EXPECT_TRUE(state_->checkpoints().ReportCheckpoint(a, 10, 0).ok());
    EXPECT_TRUE(state_->jobs().Preempt(a, Seconds(10)).ok());
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(state_->checkpoints().ReportShardUpload(a, 1, 20, rank, 2, false, "").ok());
    }
    ReportAll(a, RankPhase::kExited);
    return a;
  }
  // Lets `seconds` pass with the nodes heartbeating, then ticks.
  void Pass(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      clock_.Advance(Seconds(1));
      for (const char* node : {"n1", "n2"}) {
        ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), {}));
      }
    }
    state_->Tick();
  }
};

TEST_F(UploadWaitTest, TheRestartWaitsForTheNewerStepToCommit) {
  Init(StateOptions());
  std::string a = PreemptAfterHandOff();
  EXPECT_EQ(Job(a).state, JobState::kPending);  // the GPUs are free; it waits
  std::vector<std::string> why = state_->Why(a)->reasons;
  ASSERT_FALSE(why.empty());
  EXPECT_EQ(why[0], "waiting for checkpoint step 20 to finish uploading (handed off by 2 ranks; "
                    "committed step 10); gives up in 600 s");
  Pass(5);
  EXPECT_EQ(Job(a).state, JobState::kPending);
  EXPECT_TRUE(absl::EndsWith(state_->Why(a)->reasons[0], "; gives up in 595 s"))
      << state_->Why(a)->reasons[0];
  ASSERT_TRUE(state_->checkpoints().ReportCheckpoint(a, 20, 0).ok());
  EXPECT_EQ(Job(a).state, JobState::kStarting);
  EXPECT_EQ(Job(a).attempt, 2);
  EXPECT_EQ(Job(a).committed_step, 20);
}

TEST_F(UploadWaitTest, AFailedUploadEndsTheWait) {
  Init(StateOptions());
  std::string a = PreemptAfterHandOff();
  EXPECT_EQ(Job(a).state, JobState::kPending);
  ASSERT_TRUE(state_->checkpoints().ReportShardUpload(a, 1, 20, 1, 2, true, "store unreachable").ok());
  EXPECT_EQ(Job(a).state, JobState::kStarting);
  EXPECT_EQ(Job(a).committed_step, 10);  // resumes from the older step
}

TEST_F(UploadWaitTest, ALostServiceHoldsTheJobNoLongerThanTheBound) {
  StateOptions o;
  o.checkpoint_upload_wait = Seconds(30);
  Init(o);
  std::string a = PreemptAfterHandOff();
  Pass(29);
  EXPECT_EQ(Job(a).state, JobState::kPending);
  Pass(1);
  EXPECT_EQ(Job(a).state, JobState::kStarting);
  EXPECT_TRUE(absl::IsNotFound(state_->checkpoints().ReportShardUpload("nope", 1, 1, 0, 1, false, "")));
}

TEST_F(PreemptionTest, QuotaStaysExactThroughPreemptRequeueAndReadmit) {
  StateOptions o;
  o.quotas["t"] = 4;
  Init(o);
  std::string a = state_->SubmitJob(Spec(2, 2))->job_id;
  ReportAll(a, RankPhase::kRunning);
  EXPECT_EQ(InUse("t"), 4);
  std::string b = state_->SubmitJob(Spec(1, 1))->job_id;
  EXPECT_EQ(Job(b).state, JobState::kPending);
  ASSERT_TRUE(state_->jobs().Preempt(a, Seconds(10)).ok());
  EXPECT_EQ(Job(a).state, JobState::kPreempting);
  EXPECT_EQ(InUse("t"), 4);  // held until the ranks are gone
  EXPECT_EQ(state_->Why(b)->reasons[0], "quota: tenant t uses 4 of 4 GPUs; the job needs 1");
  ReportAll(a, RankPhase::kExited);
  // A keeps its place in the queue (submitted first) and is re-admitted.
  EXPECT_EQ(Job(a).state, JobState::kStarting);
  EXPECT_EQ(Job(a).attempt, 2);
  EXPECT_EQ(Job(a).restarts, 0);
  EXPECT_EQ(InUse("t"), 4);
  EXPECT_EQ(Job(b).state, JobState::kPending);
  ASSERT_TRUE(state_->CancelJob(a).ok());
  ReportAll(a, RankPhase::kExited);
  EXPECT_EQ(Job(a).state, JobState::kCancelled);
  EXPECT_EQ(Job(b).state, JobState::kStarting);
  EXPECT_EQ(InUse("t"), 1);
  ASSERT_TRUE(state_->admin().SetQuota("t", -1).ok());
  EXPECT_TRUE(state_->accounts().Quotas().empty());
  Changes c = state_->TakeChanges();
  ASSERT_EQ(c.quotas.size(), 1u);
  EXPECT_EQ(c.quotas.at("t"), -1);
}

TEST_F(PreemptionTest, IdleAllocationIsWarnedThenReclaimedBusyOneIsNot) {
  StateOptions o;
  o.idle_reclaim_grace = Seconds(5);
  Init(o);
  JobSpec idle = Spec(1, 1);
  idle.interactive = true;
  idle.idle_timeout_s = 10;
  JobSpec busy = idle;
  std::string i = state_->SubmitJob(idle)->job_id;
  std::string b = state_->SubmitJob(busy)->job_id;
  double busy_cpu = 0;
  auto step = [&](double seconds) {
    clock_.Advance(Seconds(seconds));
    busy_cpu += seconds;  // one full core
    ReportAll(i, RankPhase::kRunning, 0.25);
    ReportAll(b, RankPhase::kRunning, busy_cpu);
    state_->Tick();
  };
  step(0);
  ASSERT_EQ(Job(i).state, JobState::kRunning);
  for (int s = 0; s < 9; ++s) step(1);
  EXPECT_FALSE(Job(i).idle_warned);  // 9 s idle
  step(1);
  EXPECT_TRUE(Job(i).idle_warned);
  EXPECT_EQ(Job(i).reason, "idle since 2023-11-14T22:13:20Z; reclaim in 5 s, at 2023-11-14T22:13:35Z, "
                           "unless used (athanor alloc --keep " + i + ")");
  bool noticed = false;
  for (const char* node : {"n1", "n2"}) {
    for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
      if (d.job_id == i) noticed = d.notice == Job(i).reason && d.archive_workdir;
    }
  }
  EXPECT_TRUE(noticed);
  for (int s = 0; s < 4; ++s) step(1);
  EXPECT_FALSE(Job(i).stopping);  // 14 s: inside the grace
  step(1);
  EXPECT_TRUE(Job(i).stopping);
  ReportAll(i, RankPhase::kExited);
  EXPECT_EQ(Job(i).state, JobState::kCancelled);
  EXPECT_EQ(Job(i).reason, "reclaimed: idle for 15 s");
  EXPECT_EQ(Job(b).state, JobState::kRunning);
  EXPECT_FALSE(Job(b).idle_warned);
  for (int s = 0; s < 30; ++s) step(1);
  EXPECT_EQ(Job(b).state, JobState::kRunning);
  EXPECT_FALSE(Job(b).idle_warned);
}

TEST_F(PreemptionTest, GpuUtilisationDecidesIdlenessWhereMeasured) {
  StateOptions o;
  o.idle_reclaim_grace = Seconds(2);
  Init(o);
  JobSpec spec = Spec(1, 1);
  spec.interactive = true;
  spec.idle_timeout_s = 5;
  std::string cpu_busy = state_->SubmitJob(spec)->job_id;  // CPU busy, GPU idle: reclaimed
  std::string gpu_busy = state_->SubmitJob(spec)->job_id;  // CPU idle, GPU at 40 %: kept
  double cpu = 0;
  auto report = [&](const std::string& job, double cpu_s, double gpu) {
    for (const char* node : {"n1", "n2"}) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        RankReport r = ReportOf(d);
        if (d.job_id == job) {
          r.cpu_seconds = cpu_s;
          r.gpu_utilization = gpu;
        }
        reports.push_back(r);
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
  };
  for (int s = 0; s < 8; ++s) {
    clock_.Advance(Seconds(1));
    cpu += 1;
    report(cpu_busy, cpu, 0);
    report(gpu_busy, 0, 40);
    state_->Tick();
  }
  EXPECT_TRUE(Job(cpu_busy).stopping);
  EXPECT_EQ(Job(cpu_busy).stop_reason, "reclaimed: idle for 7 s");
  EXPECT_FALSE(Job(gpu_busy).idle_warned);
  EXPECT_FALSE(Job(gpu_busy).stopping);
}

}  // namespace
}  // namespace athanor::coord
