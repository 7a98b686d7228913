// LifecycleCounters: what the job state machine counts for /metrics
// (preemptions by reason, requeues by cause, time from submission to first
// start). Plain values, updated by JobLifecycle under the coordinator's state
// lock (an increment: nanoseconds on the scheduling path) and copied out with
// the cluster view after a pass; never read by a scrape directly.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace athanor::coord {

// Why an attempt is preempted; /metrics counts preemptions by it
// (athanor_preemptions_total{reason=PreemptCauseName}).
// kMasterPort: the attempt's master port was taken on rank 0's node (by
// another process; not the job's doing), so it is requeued like a preemption.
// kShrink / kGrow: an elastic job resized (a node lost or taken while enough
// remain; more nodes free at a checkpoint).
enum class PreemptCause { kPriority, kAdmin, kDrain, kStraggler, kMasterPort, kCredit, kShrink, kGrow };

inline const char* PreemptCauseName(PreemptCause cause) {
  switch (cause) {
    case PreemptCause::kPriority: return "priority";
    case PreemptCause::kAdmin: return "admin";
    case PreemptCause::kDrain: return "drain";
    case PreemptCause::kStraggler: return "straggler";
    case PreemptCause::kMasterPort: return "master_port";
    case PreemptCause::kCredit: return "credit";
    case PreemptCause::kShrink: return "shrink";
    case PreemptCause::kGrow: return "grow";
  }
  return "drain";
}

struct LifecycleCounters {
  // Upper bounds (seconds) of the pending-time histogram's buckets; +Inf last.
  static constexpr std::array<double, 10> kPendingBuckets = {0.1, 0.5, 1,    5,    15,
                                                             60,  300, 1800, 7200, 86400};
  std::map<std::string, int64_t> preemptions;  // by PreemptCauseName
  std::map<std::string, int64_t> requeues;     // cause: preemption | failure | resize
  std::map<std::string, int64_t> resizes;      // elastic jobs: shrunk | grown
  std::array<uint64_t, kPendingBuckets.size() + 1> pending_buckets{};  // not cumulative
  uint64_t pending_count = 0;
  double pending_sum_s = 0;

  void ObservePending(double seconds) {
    size_t i = 0;
    while (i < kPendingBuckets.size() && seconds > kPendingBuckets[i]) ++i;
    ++pending_buckets[i];
    ++pending_count;
    pending_sum_s += seconds;
  }
};

}  // namespace athanor::coord
