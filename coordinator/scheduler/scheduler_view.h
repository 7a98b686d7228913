// SchedulerView: the scheduler's tables, read-only: why a job waits, the
// node table, usage, a job's entry, the queue's length (all, or a tenant's),
// the last pass's summary. Scheduler::view() gives one; the Scheduler changes
// the tables, this only reads them (as SchedulePass decides on them and
// Explain reads them).
//
// Not thread-safe, as the Scheduler. Holds its tables by reference: valid
// while the Scheduler lives; cheap to make, so make one where it is used.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/scheduler/scheduler_state.h"
#include "coordinator/scheduler/why.h"

namespace athanor::sched {

class SchedulerView {
 public:
  SchedulerView(const SchedulerState& state, const Clock* clock) : s_(state), clock_(clock) {}

  // NotFound for a job the scheduler does not hold.
  absl::StatusOr<WhyReport> Why(const JobId& job) const;
  const Membership& membership() const { return s_.membership; }
  const Accounting& accounting() const { return s_.accounting; }
  // Null for a job the scheduler does not hold.
  const QueuedJob* job(const JobId& id) const { return s_.Find(id); }
  size_t pending() const { return s_.queue.size(); }
  // Pending jobs of `tenant` (the submission cap's count).
  size_t pending_of(const std::string& tenant) const { return s_.queue.TenantSize(tenant); }
  const PassSummary& last_pass() const { return s_.last_pass; }

 private:
  const SchedulerState& s_;
  const Clock* const clock_;  // not owned
};

}  // namespace athanor::sched
