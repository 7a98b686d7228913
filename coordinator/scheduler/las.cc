#include "coordinator/scheduler/las.h"

namespace athanor::sched {

const char* SchedulingPolicyName(SchedulingPolicy policy) {
  switch (policy) {
    case SchedulingPolicy::kDefault: return "default";
    case SchedulingPolicy::kFifo: return "fifo";
    case SchedulingPolicy::kLas: return "las";
  }
  return "?";
}

std::optional<SchedulingPolicy> ParseSchedulingPolicy(const std::string& name) {
  for (SchedulingPolicy p : {SchedulingPolicy::kDefault, SchedulingPolicy::kFifo, SchedulingPolicy::kLas}) {
    if (name == SchedulingPolicyName(p)) return p;
  }
  return std::nullopt;
}

int LasQueue(const LasOptions& options, const QueuedJob& job, double attained_gpu_s) {
  const double since_forgiven = attained_gpu_s - job.las_forgiven_gpu_s;
  int queue = 0;
  for (double threshold : options.thresholds_gpu_s) {
    if (since_forgiven < threshold) break;
    ++queue;
  }
  return queue;
}

}  // namespace athanor::sched
