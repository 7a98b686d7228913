// JobLifecycle: every job's record and its state machine.
//
// Lifecycle of an attempt: PENDING --placement--> STARTING (allocation held,
// ranks desired) --every rank reported running--> RUNNING --every rank exit 0-->
// SUCCEEDED. A non-zero exit, a lost rank, a DOWN node or a cancel "stops" the
// attempt: its ranks stay desired with terminate set until none runs any more,
// then the allocation is released and the job moves to FAILED, CANCELLED, or
// back to PENDING (attempt+1 later) while max_restarts allows. Preemption
// stops an attempt with the job's grace as the SIGTERM->SIGKILL delay and
// requeues it without consuming a restart.
//
// A rank that failed to start because another process holds the attempt's
// master port on rank 0's node (the agent says so: RankReport::
// master_port_taken) is the platform's fault, not the job's: the attempt is
// requeued like a preemption, without using a restart, with that node
// recorded in master_port_taken_on. The next attempt gets the range's next
// master port and a rank 0 on another of its nodes where it has one
// (AttemptLauncher). After kMaxMasterPortRequeues such requeues the next one
// is an ordinary failure (a restart, or FAILED), so a squatter on every port
// of every node cannot loop a job. Nothing counts against the node.
//
// Submissions may carry an idempotency key: the first one with a (tenant,
// key) creates the job, later ones get that job back. Keys are kept in the
// job records, so they survive restarts.
//
// Not thread-safe: confined to ClusterState's owner. Collaborators are not
// owned and outlive it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/attempt_launcher.h"
#include "coordinator/core/job_request.h"
#include "coordinator/core/lifecycle_counters.h"
#include "coordinator/core/node_table.h"
#include "coordinator/core/tenant_accounts.h"
#include "coordinator/core/tenant_billing.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/volumes/owed_stores.h"

namespace athanor::coord {

// Reasons BeginPreempt is given by the scheduler and by `athanor preempt`.
inline constexpr char kPriorityPreemption[] = "preempted for a higher-priority job";
inline constexpr char kAdminPreemption[] = "preempted by an admin";
// Requeues of a job without a restart because its master port was taken.
inline constexpr size_t kMaxMasterPortRequeues = 3;

class JobLifecycle {
 public:
  struct Parts {
    const StateOptions* options;
    const WallClock* clock;
    sched::Scheduler* sched;
    NodeTable* nodes;
    ChangeLog* log;
    AttemptLauncher* launcher;
    TenantAccounts* accounts;
    TenantBilling* billing;
    // Told of each requeued attempt's ended ranks, which owe volume stores
    // (volumes/owed_stores.h); null: none are tracked.
    OwedStores* owed_stores = nullptr;
  };
  explicit JobLifecycle(Parts parts) : p_(parts) {}

  // Jobs from the store: attempts holding GPUs keep their placement, pending
  // jobs are queued again in submission order.
  void Restore(std::vector<JobRecord> jobs);
  // Validates (InvalidArgument naming the field; a hang_timeout_s below
  // HangOptions::timeout_floor too) and queues a job. `max_pending` > 0: the
  // most pending jobs the spec's tenant may have; a new job past it is
  // ResourceExhausted (a retry of an existing key is not refused).
  // `image_digest`: what spec.image resolved to (ClusterImages), kept in the record.
  absl::StatusOr<SubmitResult> Submit(const JobSpec& spec, const std::string& idempotency_key,
                                      int32_t max_pending = 0, const std::string& image_digest = "");
  // NotFound for an unknown id. Finished jobs come back unchanged.
  absl::StatusOr<JobRecord> Cancel(const std::string& id);
  // By an admin; FailedPrecondition unless the job is running.
  absl::StatusOr<JobRecord> Preempt(const std::string& id, Duration grace);
  // Use of a running interactive instance seen outside agents' reports (a
  // shell's input, `athanor alloc --keep`): its idle clock starts over
  // (TenantAccounts::MarkActive), and the job is marked so the signal is
  // durable. NotFound for an unknown job, FailedPrecondition for one that is
  // not a running interactive one.
  absl::StatusOr<JobRecord> NoteActivity(const std::string& id, const std::string& signal,
                                         const std::string& detail);
  // The newest committed checkpoint step; older steps are ignored.
  absl::Status ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix);

  // Agents' rank reports (running, exited, failed to start).
  void ApplyReports(const std::vector<RankReport>& reports);
  void StartAttempt(const std::string& id, const std::vector<sched::NodeAllocation>& placement);
  void BeginPreempt(JobRecord* job, Duration grace, PreemptCause cause, const std::string& reason);
  void BeginStop(JobRecord* job, JobState outcome, const std::string& reason);
  // Stops the attempt: requeued while restarts remain, else FAILED.
  void FailAttempt(JobRecord* job, const std::string& reason);
  // Each attempt with a rank on `node` (not yet stopping) fails (a node
  // lost: the platform's fault, AttemptSpan::platform_fault) / is preempted.
  // An elastic attempt that keeps its least nodes shrinks instead, also one
  // already stopping on a failure (ShrinkInsteadOfFailing).
  void FailAttemptsOn(const std::string& node, const std::string& why);
  void PreemptAttemptsOn(const std::string& node, Duration grace, const std::string& why);
  // Ends the attempts whose ranks all stopped; after node changes.
  void SettleAll();

  JobRecord* Mutable(const std::string& id);
  const JobRecord* Find(const std::string& id) const;
  const std::map<int64_t, JobRecord>& all() const { return jobs_; }
  const std::set<int64_t>& active() const { return active_; }  // holding an allocation
  // Rank 0's newest training figures, persisted with the job (NotFound).
  absl::Status RecordTelemetry(const std::string& id, const TelemetryFigures& figures);
  const LifecycleCounters& counters() const { return counters_; }

 private:
  void Evaluate(JobRecord* job);
  // Attempts with a rank on `node` that are not stopping yet.
  std::vector<JobRecord*> RunningOn(const std::string& node);
  void TrySettle(JobRecord* job);
  // An elastic job's attempt is stopped to run again at another size
  // ("shrunk" / "grown", JobRecord::stop_resize; elastic_resize.h says when):
  // like a preemption with `grace`, requeued at once using no restart; the
  // scheduler places it on as many nodes as it can give, least to most.
  void BeginResize(JobRecord* job, Duration grace, PreemptCause cause, const std::string& reason);
  // The ranks that survive a lost node usually see it gone first (their
  // collectives fail and they exit) while the heartbeat timeout still runs,
  // so the attempt is stopping on a failure when `node` goes DOWN. It could
  // not settle before (the lost node's ranks never report): when `node` is
  // one of its own and it keeps its least nodes without it, the stop becomes
  // the shrink it would have been had the DOWN come first (no restart used).
  void ShrinkInsteadOfFailing(JobRecord* job, const std::string& node, const std::string& why);
  void Finish(JobRecord* job, JobState outcome, const std::string& reason);
  void Mark(const JobRecord& job) { p_.log->MarkJob(job.seq); }
  // Tells the attempt's nodes (new generations) and remembers what they must ack.
  void PublishStop(const JobRecord& job);
  // While `job` stops because a rank exited with a code, a rank reported
  // killed by a signal its agent did not send (a kill, the OOM killer) died
  // of it on its own: the reason names it instead (the other rank most
  // likely exited on its dead peer). Once per stop.
  void BlameSignal(JobRecord* job, const RankStatus& st);
  // A rank of the attempt failed to start because its master port was taken
  // on rank 0's node: requeued without a restart, within the bound.
  void RequeueForTakenPort(JobRecord* job, const RankStatus& st);

  const Parts p_;
  std::map<int64_t, JobRecord> jobs_;  // by seq
  std::set<int64_t> active_;
  // Stopping attempts: per node, the generation that carries the stop; a
  // rank is settled once its node acknowledged it.
  std::map<int64_t, std::map<std::string, uint64_t>> stop_generation_;
  // Stopping attempts whose reason is a rank's exit with a code (by seq).
  std::set<int64_t> blamed_exit_;
  std::map<std::pair<std::string, std::string>, int64_t> by_key_;  // (tenant, key) -> seq
  int64_t next_seq_ = 1;
  LifecycleCounters counters_;
};

}  // namespace athanor::coord
