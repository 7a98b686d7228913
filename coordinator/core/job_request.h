// What the scheduler core is told about a job record: its shape, policy and
// avoided nodes (sched::JobRequest), and the preemption grace it gets.
#pragma once

#include <vector>

#include "coordinator/model/state_types.h"
#include "coordinator/scheduler/types.h"

namespace athanor::coord {

// The job's own grace period, else the coordinator's default.
Duration GraceOf(const JobRecord& job, const StateOptions& options);
sched::JobRequest ToSchedRequest(const JobRecord& job, const StateOptions& options);
// The GPUs the job's current attempt holds, per node in rank order.
std::vector<sched::NodeAllocation> ToSchedPlacement(const JobRecord& job);

}  // namespace athanor::coord
