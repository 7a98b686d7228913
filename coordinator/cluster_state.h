// The coordinator's pure core: the node table and every job's state machine.
//
// It decides; it does no I/O. Each operation changes records in memory and
// remembers which; the caller (CoordinatorCore) takes them with TakeChanges(),
// writes them to the store, and only then lets agents see the new desired sets
// (generation()). Time comes from the injected Clock, so tests drive heartbeat
// timeouts with a FakeClock.
//
// Lifecycle of an attempt: PENDING --placement--> STARTING (allocation held,
// ranks desired) --every rank reported running--> RUNNING --every rank exit 0-->
// SUCCEEDED. A non-zero exit, a lost rank, a DOWN node or a cancel "stops" the
// attempt: its ranks stay desired with terminate set until none runs any more,
// then the allocation is released and the job moves to FAILED, CANCELLED, or
// back to PENDING (attempt+1 later) while max_restarts allows.
//
// Placement and policy come from the scheduler core (coordinator/scheduler):
// every pass's decisions (start an attempt on a placement, preempt a victim)
// are applied here and become durable with the next TakeChanges() before any
// agent sees them. Preemption stops an attempt with the job's grace as the
// SIGTERM->SIGKILL delay and requeues it without consuming a restart.
//
// Not thread-safe: the owner serialises calls. The Clock is not owned.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/types.h"

namespace athanor::coord {

struct StateOptions {
  Duration heartbeat_timeout = Seconds(10);
  int32_t master_port_min = 29500;
  int32_t master_port_max = 29999;
  int64_t kill_after_ms = 5000;        // SIGTERM -> SIGKILL for stopped ranks
  std::string coordinator_address;     // ATHANOR_COORDINATOR seen by ranks
  Duration default_grace = Seconds(60);  // preemption grace when a job names none
  Duration min_run_time = Seconds(300);  // before the scheduler may preempt a job again
  bool backfill = true;
  std::map<std::string, int32_t> quotas;  // tenant -> GPUs (--quota); the store's win
  Duration idle_reclaim_grace = Seconds(60);  // idle warning -> reclaim
  double idle_cpu_fraction = 0.01;  // idle below this share of one core (x100: GPU utilisation %)
};

struct QuotaRow {
  std::string tenant;
  int32_t gpus = 0;
  int32_t gpus_in_use = 0;
};

struct UsageRow {
  std::string tenant;
  std::string job_id;  // empty on a tenant's total
  double gpu_seconds = 0;
  int32_t gpus_in_use = 0;
};

struct WhyResult {
  JobState state = JobState::kPending;
  std::vector<std::string> reasons;
  int32_t queue_position = 0;
};

// Records to persist after one or more operations.
struct Changes {
  std::vector<JobRecord> jobs;
  std::vector<NodeRecord> nodes;
  std::map<std::string, int32_t> quotas;  // tenant -> GPUs; < 0: removed
  bool empty() const { return jobs.empty() && nodes.empty() && quotas.empty(); }
};

struct NodeView {
  NodeRecord record;
  int32_t gpus_allocated = 0;
  std::vector<std::string> jobs;
};

class ClusterState {
 public:
  ClusterState(StateOptions options, const Clock* clock);

  // Loads what the store held (after a coordinator restart). Nodes become
  // UNKNOWN until their agent registers again; running attempts are kept.
  // Rebuilds the scheduler: running/preempting attempts keep their
  // placement, pending jobs are queued again in submission order. `quotas`
  // (from the store) override the --quota flags.
  void Restore(std::vector<JobRecord> jobs, std::vector<NodeRecord> nodes,
               std::map<std::string, int32_t> quotas = {});

  // Validates, refuses a job that can never fit (InvalidArgument naming why),
  // queues it and tries to place it. Returns the new job's id.
  absl::StatusOr<std::string> SubmitJob(const JobSpec& spec);
  // NotFound for an unknown id. Finished jobs come back unchanged.
  absl::StatusOr<JobRecord> CancelJob(const std::string& id);

  // An agent (re)registers, reporting every rank it runs or saw exit. Ranks
  // the coordinator placed there that the agent no longer knows are lost.
  absl::Status RegisterNode(const NodeRecord& node, const std::vector<RankReport>& ranks);
  // False when the node must register first (unknown, or coordinator restart).
  // A failed health check drains the node with `health_message` as reason.
  bool Heartbeat(const std::string& node, uint64_t known_generation,
                 const std::vector<RankReport>& ranks, bool health_ok = true,
                 const std::string& health_message = "");
  // Heartbeat timeouts, stop completion, placement of pending jobs.
  void Tick();

  // ---- admin (cluster_admin.cc)
  // Preempts a running job by hand (grace 0: the job's own); it is requeued.
  absl::StatusOr<JobRecord> PreemptJob(const std::string& id, Duration grace);
  // DRAINING: no new work, running attempts preempted with `grace` (0: each
  // job's own) and requeued; DRAINED once empty.
  absl::StatusOr<NodeView> DrainNode(const std::string& name, Duration grace,
                                     const std::string& reason);
  absl::StatusOr<NodeView> UndrainNode(const std::string& name);
  absl::Status SetQuota(const std::string& tenant, int32_t gpus);  // < 0: remove
  std::vector<QuotaRow> Quotas() const;
  // Per tenant (total row first, then its jobs), GPU time after `since_unix`.
  std::vector<UsageRow> Usage(const std::string& tenant, double since_unix) const;
  absl::StatusOr<WhyResult> Why(const std::string& id) const;
  // The newest committed checkpoint step of a job (agents' reports and the
  // coordinator's reads of the checkpoint store); older steps are ignored.
  absl::Status ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix);
  // Running jobs with a checkpoint_uri: id -> uri.
  std::map<std::string, std::string> CheckpointTargets() const;

  // The ranks `node` should run now. Empty for unknown nodes.
  std::vector<DesiredRank> DesiredFor(const std::string& node) const;
  // Bumped whenever any node's desired set changes.
  uint64_t generation() const { return generation_; }

  const JobRecord* FindJob(const std::string& id) const;
  std::vector<JobRecord> Jobs(bool include_finished) const;  // in submission order
  std::vector<NodeView> Nodes() const;                       // by name
  const NodeRecord* FindNode(const std::string& name) const;

  Changes TakeChanges();
  // Puts back changes that could not be persisted, so the next TakeChanges()
  // retries them.
  void ReturnChanges(const Changes& changes);

 private:
  struct NodeRuntime {
    TimePoint last_seen;
    bool registered = false;  // registered since this coordinator started
    bool health_failed = false;  // drains on the ok -> failed edge only
    uint64_t acked_generation = 0;
    std::set<std::tuple<std::string, int32_t, int32_t>> running;  // job, attempt, rank
  };

  JobRecord* MutableJob(const std::string& id);
  void MarkJob(const JobRecord& job) { dirty_jobs_.insert(job.seq); }
  void MarkNode(const std::string& name) { dirty_nodes_.insert(name); }
  void DesiredChanged() { ++generation_; }

  void ApplyReports(const std::vector<RankReport>& reports);
  void EvaluateJob(JobRecord* job);
  void BeginStop(JobRecord* job, JobState outcome, const std::string& reason);
  // Fails the attempt: requeues while restarts remain, else FAILED.
  void FailAttempt(JobRecord* job, const std::string& reason);
  bool RankSettled(const JobRecord& job, const RankPlacement& p) const;
  void TrySettle(JobRecord* job);
  void Finish(JobRecord* job, JobState outcome, const std::string& reason);
  void Schedule();
  void StartAttempt(JobRecord* job, const std::vector<sched::NodeAllocation>& placement);
  // Stops the attempt as a preemption: SIGKILL after `grace`, requeue.
  void BeginPreempt(JobRecord* job, Duration grace, const std::string& reason);
  Duration JobGrace(const JobRecord& job) const;
  sched::JobRequest ToRequest(const JobRecord& job) const;
  static sched::NodeSpec ToSpec(const NodeRecord& node);
  double UnixNow() const;
  TimePoint FromUnix(double unix) const;
  void UpdateDrained();
  void TrackUse(JobRecord* job, const RankReport& report);
  void MarkActive(JobRecord* job, double now_unix);
  void CheckIdle(JobRecord* job);
  int32_t ChooseMasterPort();
  void SetNodeState(NodeRecord* node, NodeState state, const std::string& reason);

  const StateOptions options_;
  const Clock* const clock_;
  std::map<int64_t, JobRecord> jobs_;  // by seq
  std::set<int64_t> active_;           // jobs holding an allocation
  std::map<int64_t, uint64_t> stop_generation_;
  std::map<std::string, NodeRecord> nodes_;
  std::map<std::string, NodeRuntime> runtime_;
  sched::Scheduler sched_;
  std::map<std::string, int32_t> quotas_;
  std::map<std::string, int32_t> dirty_quotas_;
  // Interactive jobs: per rank, the last CPU sample (cpu seconds, Unix time).
  std::map<std::pair<int64_t, int32_t>, std::pair<double, double>> cpu_samples_;
  const TimePoint mono_base_;
  const int64_t unix_base_;
  int64_t next_seq_ = 1;
  uint64_t generation_ = 1;
  int32_t port_cursor_ = 0;
  std::set<int64_t> dirty_jobs_;
  std::set<std::string> dirty_nodes_;
};

}  // namespace athanor::coord
