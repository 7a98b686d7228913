// Scheduler: the coordinator's scheduling core. Holds the cluster state
// (Membership), pending jobs (JobQueue), usage (Accounting) and tenant policy
// in its SchedulerState, changes them as nodes, tenants and jobs come and go,
// and turns them into decisions with Schedule() (one SchedulePass).
//
// Policy, in the order a pass applies it:
//   - the order of pending jobs, by SchedulerOptions::policy:
//     kDefault: priority classes, higher first; inside a class, submit
//     order up to the first job that cannot start (the head), then the
//     tenant furthest below its fair share (GPUs in use / share weight)
//     first, FIFO by submit sequence within a tenant (with
//     SchedulerOptions::strict_fair_share, fair share from the first job);
//     kFifo: submit sequence only (no classes, no fair share, and no job
//     preempts another for its place in the order);
//     kLas: priority classes, then least attained GPU time (las.h), then
//     submit sequence; a blocked job may preempt jobs of a higher LAS queue
//     in its class as it would lower-priority ones;
//   - hard per-tenant GPU quotas (jobs over quota are skipped, not blocking);
//   - all-or-nothing gangs placed by Placement (topology, best fit);
//   - the first job that cannot start (the "head") may preempt (Preemption)
//     lower-priority preemptible jobs that have run min_run_time, and
//     preemptible borrowers of its reservation at any age; it also gets a
//     Reservation, and later jobs backfill only where they cannot delay it
//     (off: strict order). While it waits for its victims to exit, no job
//     borrows the GPUs they free. Under kDefault with strict fair share and
//     SchedulerOptions::keep_head the head keeps that place on later passes
//     until it starts, unless a higher class is pending, an aged job goes
//     first, or it is held or over quota;
//   - a job whose GPUs are PREEMPTING gets them back only at OnJobExited.
//
// Decisions are applied to the state before Schedule returns (a started job
// holds its GPUs, a victim is PREEMPTING); the caller persists them, then acts.
// After a restart the caller rebuilds the state with AddNode, Submit (keeping
// submit_seq) and Restore.
//
// Threading: not thread-safe; the caller serialises calls (the coordinator
// holds its state lock). Ownership: `clock` is not owned and must outlive it.
// Errors: InvalidArgument for requests that can never be satisfied (with the
// reason), NotFound for unknown ids, FailedPrecondition for wrong states.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/scheduler/scheduler_state.h"
#include "coordinator/scheduler/scheduler_view.h"
#include "coordinator/scheduler/types.h"
#include "coordinator/scheduler/why.h"

namespace athanor::sched {

class Scheduler {
 public:
  Scheduler(const Clock* clock, SchedulerOptions options);

  // ---- nodes (see Membership for the semantics)
  absl::Status AddNode(const NodeSpec& spec);
  // Returns the jobs holding resources on the node; for DOWN the caller ends
  // them and reports each with OnJobExited.
  absl::StatusOr<std::vector<JobId>> SetNodeState(const std::string& name, MemberState state);
  absl::Status Heartbeat(const std::string& name);
  absl::Status SetNodeNote(const std::string& name, bool drain, std::string reason) {
    return s_.membership.SetNote(name, drain, std::move(reason));
  }
  absl::Status SetNodeCachedImages(const std::string& name, std::vector<std::string> digests) {
    return s_.membership.SetCachedImages(name, std::move(digests));
  }

  // ---- tenants
  // A hard quota of `quota_gpus` (< 0: none) and a fair-share weight
  // (<= 0: the default, 1).
  void SetTenant(const std::string& tenant, int quota_gpus, double share = 1.0);

  // ---- jobs
  // Queues a job. submit_seq 0 assigns the next sequence number; a nonzero
  // one (restore) is kept, and so are `marks` (a restore: the job keeps its
  // time pending and LAS's marks; a queued_at later than now reads as now).
  // InvalidArgument when it can never fit the current inventory or its
  // tenant's quota, saying why.
  absl::Status Submit(JobRequest job, const QueueMarks& marks = {});
  // Removes a pending job. FailedPrecondition when it holds resources: end it
  // and report OnJobExited instead.
  absl::Status Cancel(const JobId& job);
  // The job's processes are gone: its resources are free again. `requeue`
  // puts it back to pending with its original submit order (preempted, or a
  // failure with restarts left); otherwise it is forgotten.
  absl::Status OnJobExited(const JobId& job, bool requeue);
  // Marks a RUNNING job PREEMPTING (preempted by hand, or its node drains):
  // its GPUs come back at OnJobExited. NotFound / FailedPrecondition when it
  // holds nothing; a job already PREEMPTING keeps the earlier deadline.
  absl::Status MarkPreempting(const JobId& job, TimePoint deadline);
  // Holds a pending job from starting while `why` is non-empty (shown by
  // Why()); an empty `why` lets it start again. Passes skip a held job
  // without making it the head. NotFound for an unknown job.
  absl::Status SetHold(const JobId& job, std::string why);
  // Holds every pending job of `tenant`, queued now or later, while `why` is
  // non-empty (a tenant out of credit); Why() shows `why`.
  void SetTenantHold(const std::string& tenant, std::string why);
  // From now on the job is not placed on `nodes` (it moves off a straggler's
  // node). Only while it holds resources (its queue entry is made at
  // OnJobExited); FailedPrecondition for a pending job, NotFound for none.
  absl::Status SetAvoidNodes(const JobId& job, std::vector<std::string> nodes);
  // Newest committed checkpoint of a running job (for victim choice).
  absl::Status OnCheckpoint(const JobId& job, TimePoint committed_at);
  // How many more nodes a RUNNING elastic job could take now, up to its
  // most: UP nodes it does not hold that fit one share of it and have it
  // free, within its tenant's quota, and only while no pending job waits
  // (one that does has the better claim to free GPUs). 0 otherwise.
  int GrowableNodes(const JobId& job) const;
  // Re-creates a job holding its persisted placement (after a restart):
  // RUNNING, or PREEMPTING when `preempt_deadline` is given; it keeps its
  // preemptions for order from `marks`.
  absl::Status Restore(JobRequest job, const std::vector<NodeAllocation>& placement,
                       TimePoint started_at, std::optional<TimePoint> last_checkpoint,
                       std::optional<TimePoint> preempt_deadline = std::nullopt,
                       const QueueMarks& marks = {});

  // One scheduling pass at clock->Now().
  std::vector<Decision> Schedule();

  // ---- introspection: the tables, read-only (scheduler_view.h)
  SchedulerView view() const { return SchedulerView(s_, clock_); }

 private:
  const Clock* const clock_;
  const SchedulerOptions options_;
  SchedulerState s_;
  uint64_t next_seq_ = 1;
  // Inventory nodes able to host one share of a shape, valid for one
  // Membership::inventory_version().
  std::map<ShapeKey, int> hosts_cache_;
  uint64_t hosts_cache_version_ = 0;
};

}  // namespace athanor::sched
