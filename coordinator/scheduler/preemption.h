// Preemption: which running jobs a blocked job should preempt.
//
// The scheduler passes the candidates (preemptible, lower priority, past the
// minimum run time; or borrowers of the head's reservation) and a base state
// in which the GPUs of already-PREEMPTING jobs count as free, so nothing more
// than needed is preempted. A plan minimises, in order: lost work (GPU-seconds
// since each victim's newest committed checkpoint, or its start), then GPUs
// freed. Up to `exact_limit` candidates the search is exhaustive (branch and
// bound); above it, greedy by lost work per GPU, then pruned of any victim
// not needed.
//
// Threading: pure function over the state passed in.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "coordinator/scheduler/membership.h"
#include "coordinator/scheduler/placement.h"

namespace athanor::sched {

struct PreemptionCandidate {
  JobId job;
  int64_t lost_gpu_us = 0;  // work lost if preempted now
  int gpus = 0;
  std::vector<std::pair<int, Resources>> holds;  // node index -> held there
};

struct PreemptionPlan {
  std::vector<JobId> victims;  // sorted by id
  int64_t lost_gpu_us = 0;
  int gpus_freed = 0;
};

// `base[i]`: what node i would have free without any new victim.
std::optional<PreemptionPlan> PlanPreemption(const Membership& members, const JobRequest& job,
                                             const std::vector<Resources>& base,
                                             std::vector<PreemptionCandidate> candidates,
                                             int exact_limit);

}  // namespace athanor::sched
