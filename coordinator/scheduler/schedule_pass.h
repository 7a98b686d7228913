// SchedulePass: one scheduling pass over the scheduler's tables at one
// instant. See scheduler.h for the policy it applies.
//
// Decisions are applied to the state as they are made (a started job holds
// its GPUs, a victim is PREEMPTING), and the pass leaves its summary in
// state->last_pass. Free resources only shrink during a pass (starts take,
// preemptions free nothing until exit), so a shape that failed to place
// stays failed: the pass caches those failures and skips their jobs.
//
// Made for one Run(); `state` and `options` are not owned and outlive it.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "coordinator/scheduler/placement.h"
#include "coordinator/scheduler/scheduler_state.h"

namespace athanor::sched {

class SchedulePass {
 public:
  SchedulePass(SchedulerState* state, const SchedulerOptions& options, TimePoint now)
      : s_(*state), options_(options), now_(now) {}

  std::vector<Decision> Run();

 private:
  // Whether a job waited SchedulerOptions::age_limit by `now_` (not under FIFO).
  bool Aged(const QueuedJob& job) const;
  // The aged jobs, longest waiting first, ahead of any policy's order.
  void VisitAged();
  // kDefault with strict fair share: the last pass's head, before the
  // policy's order, while it is pending and of the highest pending class
  // (SchedulerOptions::keep_head).
  void VisitLastHead();
  // The default policy's order: classes, then (unless strict_fair_share)
  // submit order up to the head, then fair share between tenants.
  void RunFairShare();
  // kFifo and kLas: every pending job sorted once by the policy's key.
  void RunOrdered();
  // One pending job in pass order: held, over quota, the head, or backfill.
  void Visit(QueuedJob& job);
  // Whether `head` may preempt running `holder` for order (not for borrowing).
  bool Outranks(const QueuedJob& head, const QueuedJob& holder) const;
  // kLas: whether pending `job`, preempted for order, has waited
  // LasOptions::recall_after since its requeue.
  bool Recalling(const QueuedJob& job) const;
  // kLas: whether recalling `head` may preempt `holder`, a job of its class
  // that started since head's requeue (before its minimum run time too).
  bool Recalls(const QueuedJob& head, const QueuedJob& holder) const;
  int LasQueueOf(const QueuedJob& job) const;
  bool Dead(const ShapeKey& shape) const;
  // Places with the failure cache (caps null: on everything free).
  PlacementResult Place(const JobRequest& job, const NodeCaps* caps);
  // Place, for an elastic job the largest size from `most` down to its
  // least that fits (a fixed job: its size, `most` unused).
  PlacementResult PlaceSized(const JobRequest& job, int most, const NodeCaps* caps);
  void StartJob(QueuedJob& job, const std::vector<int>& nodes);
  // The first job of the pass that cannot start: preempt for it or reserve.
  void HandleHead(QueuedJob& job, int eligible_free);
  // Any later job: start it only where it cannot delay the head.
  // `most`: an elastic job's largest size this pass (its quota's limit).
  void TryBackfill(QueuedJob& job, int most);

  SchedulerState& s_;
  const SchedulerOptions& options_;
  const TimePoint now_;

  std::vector<Decision> out_;
  bool head_found_ = false;
  JobId head_;
  bool strict_blocked_ = false;
  bool head_waits_preemption_ = false;  // the head has victims PREEMPTING for it
  std::optional<Reservation> reservation_;
  std::vector<JobId> started_;
  size_t visited_ = 0;  // pending jobs looked at
  std::map<ShapeKey, int> failed_uncapped_;  // -> eligible node count
  std::map<ShapeKey, int> failed_capped_;
};

}  // namespace athanor::sched
