// SchedulerState: the tables the scheduling core keeps, and the three parts
// that work on them:
//   - Scheduler (scheduler.h) changes them between passes: nodes, tenants,
//     submissions, exits, restore;
//   - SchedulePass (schedule_pass.h) makes one pass's decisions and applies
//     them;
//   - Explain (why.h) reads them to say why a job waits.
//
// Plain tables with the few lookups every part needs. Not thread-safe: the
// Scheduler's caller serialises every use.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "coordinator/scheduler/accounting.h"
#include "coordinator/scheduler/job_queue.h"
#include "coordinator/scheduler/membership.h"
#include "coordinator/scheduler/queued_job.h"
#include "coordinator/scheduler/reservation.h"

namespace athanor::sched {

// What the last scheduling pass found.
struct PassSummary {
  std::optional<Reservation> reservation;  // held for the head, if any
  JobId head;                              // the first job that could not start
  bool strict_blocked = false;             // strict order stopped the pass at the head
  // Pending jobs the pass looked at (the rest were of shapes that could not
  // be placed any more, or behind a strict-order head).
  size_t visited = 0;
};

struct SchedulerState {
  Membership membership;
  JobQueue queue;
  Accounting accounting;
  std::unordered_map<JobId, QueuedJob> jobs;  // pending and holding resources
  std::map<std::string, int> quotas;          // GPUs; no entry: no quota
  std::map<std::string, double> shares;       // fair-share weights; no entry: 1
  std::map<std::string, std::string> tenant_holds;  // every pending job of the tenant waits: why
  // Jobs holding resources (RUNNING or PREEMPTING), by id; values point
  // into `jobs` (node-based, so stable). Unordered: what a pass derives from
  // it is sorted by job id where order matters (preemption plans, victims).
  absl::flat_hash_map<JobId, const QueuedJob*> holders;
  EndIndex ends;  // the holders with an end estimate, soonest first
  PassSummary last_pass;
  uint64_t pass_id = 0;  // passes so far

  int TenantQuota(const std::string& tenant) const;  // -1: none
  // Why a pending job may not start now, held itself or by its tenant; "" : not held.
  const std::string& HoldOf(const QueuedJob& job) const;
  double TenantShare(const std::string& tenant) const;
  const QueuedJob* Find(const JobId& id) const;  // null when unknown
  // Puts a holder in `ends` under its current EndEstimate() (after it starts
  // or is preempted), or takes it out (hold = false: it released everything).
  void IndexEnd(QueuedJob& job, bool hold = true);
};

}  // namespace athanor::sched
