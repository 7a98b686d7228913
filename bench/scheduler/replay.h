// Trace replay for the scheduler benchmark: loads the openb GPU cluster trace
// (nodes, pods) and synthetic multi-node gangs into a Workload, then replays
// it event by event through the real Scheduler on a FakeClock.
//
// Threading: single-threaded. Errors: absl::Status for unreadable traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/scheduler/types.h"

namespace athanor::bench {

struct TraceJob {
  sched::JobRequest request;  // time_limit = declared limit
  int64_t arrival_s = 0;
  int64_t duration_s = 1;     // actual run time
};

struct Workload {
  std::vector<sched::NodeSpec> nodes;
  std::vector<TraceJob> jobs;  // sorted by arrival
  int skipped_cpu_only = 0;
  int skipped_unscheduled = 0;
  int rounded_fractional = 0;
};

// Nodes and GPU pods of the openb trace. Pods: num_gpu 0 skipped (CPU-only);
// pods never scheduled in the trace skipped (no run time); gpu_milli < 1000
// rounded up to one whole GPU; duration = deletion - scheduled, declared as
// the time limit; qos LS/Guaranteed get priority 1, others 0 and preemptible.
// Nodes get synthetic topology: switch = index / 16, rack = index / 64.
absl::StatusOr<Workload> LoadOpenbTrace(const std::string& dir);

// Divides every arrival time by `factor` (> 1 raises the offered load; run
// times unchanged).
void CompressArrivals(Workload& workload, double factor);

// Appends `count` seeded gangs (2-8 nodes x 8 GPUs, 1-12 h, priority 2)
// arriving uniformly over [0, span_s).
void AddSyntheticGangs(Workload& workload, int count, int64_t span_s, uint32_t seed);

// `count` identical 8-GPU nodes with switch/rack labels.
std::vector<sched::NodeSpec> SyntheticNodes(int count);
// `count` random jobs (mostly single-node, some gangs) arriving over span_s.
void AddSyntheticJobs(Workload& workload, int count, int64_t span_s, uint32_t seed);

struct ReplayResult {
  int jobs = 0;               // started at least once
  int unfinished = 0;
  int preemptions = 0;
  double makespan_s = 0;
  double wait_mean_s = 0, wait_median_s = 0, wait_p95_s = 0;
  double gpu_utilisation = 0;  // busy GPU-seconds / (GPUs x makespan)
  // The same, from the first arrival to the last start: while work waits.
  double gpu_utilisation_loaded = 0;
  int passes = 0;
  double pass_median_us = 0, pass_p99_us = 0, pass_max_us = 0;
  // The same on the pass's thread CPU clock: what a pass costs, without the
  // time other processes of a shared machine take from it.
  double pass_cpu_median_us = 0, pass_cpu_p99_us = 0;
  double visited_median = 0, visited_p99 = 0;  // pending jobs a pass looked at
  int pending_at_end = 0;
  int pending_min_timed = 0;  // fewest jobs waiting before a timed pass
};

// Replays the workload; stops after `max_passes` timed passes if > 0. Only
// passes that start with at least `min_pending` jobs waiting are timed (the
// others still run, so the replay reaches that queue the way it would).
ReplayResult Replay(const Workload& workload, const sched::SchedulerOptions& options,
                    int max_passes = 0, int min_pending = 0);

}  // namespace athanor::bench
