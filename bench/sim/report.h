// Report: what athanor-sim prints for each policy of one run, from its
// SimResult: JCT (mean, p99), queueing delay by gang size, makespan, GPU
// utilisation, GPUs stranded by fragmentation, work lost to preemption and
// failures, scheduler time per pass; and, against the run's baseline (the
// first policy, FIFO without backfill), the ratios the goal is stated in.
//
// As a table, as JSON, and as gnuplot data and plots. Pure but for
// WritePlots, which writes files in a folder and runs gnuplot.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "bench/sim/simulator.h"

namespace athanor::sim {

struct SizeBucket {
  std::string label;  // GPUs, e.g. "9-64"
  int jobs = 0;
  double queued_mean_s = 0;
  double queued_p99_s = 0;
  int starved = 0;  // as PolicySummary::starved
};

struct PolicySummary {
  std::string policy;
  int finished = 0;
  int unfinished = 0;
  int rejected = 0;
  double jct_mean_s = 0, jct_p99_s = 0;
  double queued_mean_s = 0;
  std::vector<SizeBucket> by_size;
  double makespan_s = 0;
  double utilisation = 0;       // GPUs held / (cluster GPUs x makespan)
  // The same from the first arrival to the last: while work is offered (a
  // trace's longest job sets the makespan whatever the policy).
  double utilisation_arrivals = 0;
  double stranded_gpus = 0;     // time-averaged over the makespan
  double lost_gpu_h = 0;        // preemptions and failures
  int preemptions = 0;
  int grows = 0;                // elastic jobs stopped to start again larger
  int credit_holds = 0;         // times a tenant ran out of credit
  int credit_stops = 0;         // attempts stopped for it
  double credit_held_h = 0;     // job-hours pending while held for it (not in queued_*)
  int node_failures = 0;
  int passes = 0;
  double pass_mean_us = 0, pass_p99_us = 0;
  // Each pass's time over what it had to look at (SimResult::pass_work), in
  // µs per 1,000 nodes + jobs (pending and holding GPUs): flat across
  // cluster sizes when the pass is linear in them.
  double pass_mean_us_per_k = 0, pass_p99_us_per_k = 0;
  // Against the baseline (equal to 1 / 0 for the baseline itself):
  double jct_vs_baseline = 1;   // mean JCT ratio
  double util_vs_baseline = 1;
  // Jobs queued more than 3x as long as under the baseline, the baseline's
  // delay floored (StarvationBase: a job that waited nothing there may wait
  // a little here without counting).
  int starved = 0;
  // The starved, by what FIFO never does to a job: preempted (for priority,
  // order or a reservation) at least once; else in a class below the
  // workload's highest (the baseline ignores classes); else neither.
  int starved_preempted = 0, starved_lower_class = 0, starved_other = 0;
  double worst_queue_ratio = 0;  // max over jobs of queued / max(baseline queued, floor)
  // Mean run time of the finished jobs: the mean JCT with no queueing at
  // all, and that over the baseline's mean JCT (no policy gets below it).
  double run_mean_s = 0;
  double jct_floor_vs_baseline = 0;
};

inline constexpr double kStarvationFloorS = 60;

// What a job's queueing delay is compared with (x3) to call it starved: its
// delay under the baseline, floored at kStarvationFloorS and at
// `run_fraction` of its own run time (0: no such floor). The second floor
// reads a few minutes' wait after a preemption as no starvation for a job
// that runs for hours, as bounded slowdown does.
struct StarvationRule {
  double run_fraction = 0;
  double Base(const JobOutcome& baseline_job) const;
  // queued / Base; starved when above kStarvedRatio.
  double Ratio(const JobOutcome& job, const JobOutcome& baseline_job) const {
    return static_cast<double>(job.queued_s()) / Base(baseline_job);
  }
};
inline constexpr double kStarvedRatio = 3;

PolicySummary Summarise(const SimResult& result, const SimResult& baseline, const StarvationRule& rule = {});

// The jobs of `result` counted in PolicySummary::starved, worst ratio first
// (ties in workload order): the job's index in the workload and its ratio.
struct StarvedJob {
  size_t index = 0;
  double ratio = 0;
};
std::vector<StarvedJob> StarvedJobs(const SimResult& result, const SimResult& baseline,
                                    const StarvationRule& rule = {});

// Those jobs one line each: what the job was, how long it waited here and
// under the baseline, and how often it was preempted or lost a node.
void PrintStarved(std::ostream& out, const SimResult& result, const SimResult& baseline,
                  const StarvationRule& rule = {});
// The same as a JSON array of objects (times in seconds).
nlohmann::json StarvedToJson(const SimResult& result, const SimResult& baseline, const StarvationRule& rule = {});

void PrintTable(std::ostream& out, const std::vector<PolicySummary>& rows);
nlohmann::json ToJson(const std::vector<PolicySummary>& rows);

// Writes timeline-<policy>.dat (hours, utilisation, pending jobs; up to a
// quarter past the last instant any policy had a job pending), jct-<policy>.dat
// (JCT CDF) and plots.gp in `dir` (made if missing), then runs gnuplot there for
// utilisation.png, queue.png and jct.png. FailedPrecondition when gnuplot
// is missing (the data and script are written).
absl::Status WritePlots(const std::string& dir, const std::vector<SimResult>& results);

}  // namespace athanor::sim
