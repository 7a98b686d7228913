#include "coordinator/model/types.h"

namespace athanor::coord {

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending: return "PENDING";
    case JobState::kStarting: return "STARTING";
    case JobState::kRunning: return "RUNNING";
    case JobState::kPreempting: return "PREEMPTING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kUp: return "UP";
    case NodeState::kDraining: return "DRAINING";
    case NodeState::kDrained: return "DRAINED";
    case NodeState::kDown: return "DOWN";
    case NodeState::kUnknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

double JobGpuSeconds(const JobRecord& job, double now_unix, double since_unix) {
  double total = 0;
  for (const UsageInterval& u : job.usage) {
    double end = u.end > 0 ? u.end : now_unix;
    double start = u.start > since_unix ? u.start : since_unix;
    if (end > start) total += (end - start) * u.gpus;
  }
  return total;
}

}  // namespace athanor::coord
