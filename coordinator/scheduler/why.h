// Why a job is where it is: the text of `athanor why JOB`, worked out from
// the scheduler's tables and the reason the last pass left on the job.
// Pure functions; the caller serialises access to the state.
#pragma once

#include <string>
#include <vector>

#include "coordinator/scheduler/scheduler_state.h"

namespace athanor::sched {

struct WhyReport {
  QueuedJobState state = QueuedJobState::kPending;
  std::vector<std::string> reasons;
  int queue_position = 0;  // 1-based among pending jobs; 0 if not pending
};

// "needs 2 nodes with 8 free GPUs (model H100, 16 CPUs) each".
std::string DescribeNeed(const JobRequest& job);

// `job` is one of state.jobs. A pending job the last pass did not visit (its
// shape could not be placed any more, or strict order stopped the pass) has
// its reason worked out now.
WhyReport Explain(const SchedulerState& state, const QueuedJob& job, TimePoint now);

}  // namespace athanor::sched
