// Reservation: where and when the highest-priority blocked gang will start,
// and how much of its reserved nodes backfill may still use.
//
// The start time comes from holders' EndEstimate(): PREEMPTING jobs end at
// their deadline, running ones at start + time limit; jobs without a limit
// never end. Walking those ends in time order, the first instant at which the
// gang fits gives `start` and the nodes. If it never fits that way, `start` is
// unknown (finite = false) and the nodes are chosen on full capacity: their
// GPUs are then held for the gang as they free up.
//
// Backfill rule (Scheduler): a job whose declared limit ends by `start` may
// use anything free; any other job may use a reserved node only within
// `slack` (what the gang leaves unused there at `start`), unless it is
// preemptible, in which case it borrows and is preempted for the gang (its
// minimum run time does not protect it). No job borrows while the gang waits
// for jobs it preempted: the GPUs they free are the gang's.
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "coordinator/scheduler/membership.h"
#include "coordinator/scheduler/placement.h"
#include "coordinator/scheduler/queued_job.h"

namespace athanor::sched {

struct Reservation {
  JobId job;
  int priority = 0;
  bool finite = false;
  TimePoint start{};
  std::vector<int> nodes;
  NodeCaps slack;  // per reserved node

  // Whether a job with `limit` starting at `now` ends before the reservation.
  bool EndsBefore(TimePoint now, Duration limit) const {
    return limit > Duration::zero() && (!finite || now + limit <= start);
  }
};

// Every job holding resources that has an EndEstimate(), soonest end first,
// kept up to date as jobs start, get preempted and end (Scheduler), so that a
// pass walks only the ends it needs. Ties are in no useful order: the
// reservation takes all ends of one instant at once.
using EndIndex = std::set<std::pair<TimePoint, const QueuedJob*>>;

// `fits`: for each node index, UpAndStaticallyFits for the head. The caller
// has checked that the gang fits the UP inventory; returns nothing otherwise.
std::optional<Reservation> ComputeReservation(const Membership& members, const JobRequest& head,
                                              const EndIndex& ends, const std::vector<char>& fits,
                                              TimePoint now);

// Takes `used` on `node` out of the reservation's slack (floored at 0).
void ConsumeSlack(Reservation& reservation, int node, const Resources& used);

}  // namespace athanor::sched
