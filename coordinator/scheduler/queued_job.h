// QueuedJob: everything the core knows about one job, pending or holding
// resources. Owned by Scheduler; the policy modules read it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coordinator/scheduler/types.h"

namespace athanor::sched {

// Why a pending job did not start in the last pass (formatted by Why()).
// kBehindReservation and kStrictOrder refer to the last pass's head.
struct PendingReason {
  enum class Code {
    kNotConsidered,       // no pass since it was queued
    kQuota,               // tenant at its GPU quota
    kNoFitNow,            // not enough eligible UP nodes even if everything ended
    kHoldsReservation,    // the blocked head: waits for its reserved nodes
    kWaitingPreemption,   // the head: waits for the jobs it preempted to exit
    kBehindReservation,   // would delay the head's reservation
    kNoFree,              // too few eligible nodes with free resources
    kStrictOrder,         // backfill off: waits behind the blocked head
    kHeld,                // held by the coordinator (QueuedJob::hold says why)
  };
  Code code = Code::kNotConsidered;
  int eligible = 0;        // kNoFree / kNoFitNow: nodes that qualify
  int gpus_in_use = 0;     // kQuota
  int quota = 0;           // kQuota
  bool finite = false;     // reservation start known
  TimePoint when{};        // reservation start
  std::vector<JobId> victims;  // kWaitingPreemption
  uint64_t pass = 0;           // the pass that set it (0: none)

  // Cheap reset (the pass sets a reason on every pending job it visits;
  // `pass` is kept).
  void Set(Code c) {
    code = c;
    eligible = gpus_in_use = quota = 0;
    finite = false;
    if (!victims.empty()) victims.clear();
  }
};

// What a pass remembers of a job beyond its request, for a restarted
// coordinator to give back (it persists them with the job): when the job
// last became pending, for the age limit and LAS's recall, and LAS's marks.
struct QueueMarks {
  std::optional<TimePoint> queued_at;  // pending jobs; none: now
  int order_preemptions = 0;
  uint64_t las_behind_seq = 0;
  bool las_recalls = false;
};

struct QueuedJob {
  JobRequest req;
  QueuedJobState state = QueuedJobState::kPending;
  std::vector<int> nodes;       // held node indices, in node-rank order
  TimePoint started{};          // start of the current attempt
  TimePoint queued_at{};        // when it last became pending (submit or requeue)
  // LAS (las.h): attained GPU time forgiven when it was last requeued; its
  // queue counts only what it received since.
  double las_forgiven_gpu_s = 0;
  // LAS: how often it was preempted for order (LasOptions::max_order_preemptions).
  int order_preemptions = 0;
  // LAS: preempted for order by the job of this submit_seq, it returns right
  // behind that job rather than at its own place ahead of it (0: none).
  uint64_t las_behind_seq = 0;
  // LAS: it lost its GPUs to a preemption for order or to a node going DOWN
  // and, once pending LasOptions::recall_after, takes GPUs back rather than
  // preempting for order; cleared when it starts.
  bool las_recalls = false;
  std::optional<TimePoint> last_checkpoint;
  TimePoint preempt_deadline{};  // kPreempting: when the agents SIGKILL
  // Non-empty: it backfilled onto GPUs reserved for this head, which may
  // preempt it before its minimum run time; other jobs may not.
  JobId borrowed_from;
  PendingReason reason;
  // Non-empty: the coordinator holds this pending job from starting (e.g. a
  // newer checkpoint of it is still uploading) and this says why.
  std::string hold;
  // Its key in the scheduler's EndIndex while it holds resources with an end
  // estimate (set by the scheduler only).
  std::optional<TimePoint> indexed_end;

  // Its QueueMarks (queued_at only while pending).
  QueueMarks marks() const {
    QueueMarks m;
    if (state == QueuedJobState::kPending) m.queued_at = queued_at;
    m.order_preemptions = order_preemptions;
    m.las_behind_seq = las_behind_seq;
    m.las_recalls = las_recalls;
    return m;
  }

  // GPUs it holds (an elastic job may hold fewer than it asked for).
  int held_gpus() const { return static_cast<int>(nodes.size()) * req.gpus_per_node; }

  // When the held resources come back, if known: the preemption deadline, or
  // start + declared time limit.
  std::optional<TimePoint> EndEstimate() const {
    if (state == QueuedJobState::kPreempting) return preempt_deadline;
    if (state == QueuedJobState::kRunning && req.time_limit > Duration::zero()) {
      return started + req.time_limit;
    }
    return std::nullopt;
  }
};

}  // namespace athanor::sched
