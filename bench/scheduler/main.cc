// athanor-bench-scheduler: replays the openb GPU cluster trace plus seeded
// synthetic gangs through the real scheduler core (event-driven, FakeClock),
// with backfill on and, as the baseline in the same run, off (strict priority
// order); then times passes on a synthetic 10,000-node cluster.
//
//   athanor-bench-scheduler [--traces DIR] [--gangs N] [--seed S]
//                           [--scale-nodes N] [--scale-jobs N] [--scale-passes N] [--json]
//   athanor-bench-scheduler --metrics-ab PASSES [--scale-nodes N]   (metrics on vs off)
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "bench/scheduler/observer_ab.h"
#include "bench/scheduler/replay.h"
#include "common/options.h"

namespace {

using athanor::bench::ReplayResult;

nlohmann::json ToJson(const ReplayResult& r) {
  return {{"jobs", r.jobs},           {"unstarted", r.unfinished},
          {"preemptions", r.preemptions}, {"makespan_s", r.makespan_s},
          {"wait_mean_s", r.wait_mean_s}, {"wait_median_s", r.wait_median_s},
          {"wait_p95_s", r.wait_p95_s},   {"gpu_utilisation", r.gpu_utilisation},
          {"gpu_utilisation_loaded", r.gpu_utilisation_loaded},
          {"passes", r.passes},           {"pass_median_us", r.pass_median_us},
          {"pass_p99_us", r.pass_p99_us}, {"pass_max_us", r.pass_max_us},
          {"pass_cpu_median_us", r.pass_cpu_median_us}, {"pass_cpu_p99_us", r.pass_cpu_p99_us},
          {"visited_median", r.visited_median}, {"visited_p99", r.visited_p99},
          {"pending_at_end", r.pending_at_end}, {"pending_min_timed", r.pending_min_timed}};
}

void PrintRow(const std::string& name, const ReplayResult& r) {
  std::printf("%-30s %6d %6d %7d %11.0f %9.0f %9.0f %9.0f %6.3f %6.3f %7d %10.1f %10.1f %9.1f %9.1f %8.0f %8.0f %7d %8d\n",
              name.c_str(), r.jobs, r.unfinished, r.preemptions, r.makespan_s, r.wait_mean_s,
              r.wait_median_s, r.wait_p95_s, r.gpu_utilisation, r.gpu_utilisation_loaded, r.passes,
              r.pass_median_us, r.pass_p99_us, r.pass_cpu_median_us, r.pass_cpu_p99_us,
              r.visited_median, r.visited_p99, r.pending_at_end, r.pending_min_timed);
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = athanor::po;
  const char* root = std::getenv("ATHANOR_SOURCE_DIR");
  std::string default_traces = std::string(root ? root : ATHANOR_SOURCE_ROOT) + "/../shared/traces";
  po::options_description desc("athanor-bench-scheduler");
  desc.add_options()
      ("traces", po::value<std::string>()->default_value(default_traces), "folder with the openb CSVs")
      ("compress", po::value<double>()->default_value(1000.0),
       "divide arrival times by this factor to raise the load (run times unchanged)")
      ("gangs", po::value<int>()->default_value(200), "synthetic multi-node gangs mixed into the trace")
      ("seed", po::value<uint32_t>()->default_value(42), "seed of the synthetic generators")
      ("scale-nodes", po::value<int>()->default_value(10000), "nodes of the scaled run (0: skip)")
      ("scale-jobs", po::value<int>()->default_value(30000), "jobs of the scaled run")
      ("scale-passes", po::value<int>()->default_value(1500), "passes timed in the scaled run")
      ("scale-min-pending", po::value<int>()->default_value(0),
       "time only the scaled run's passes that start with at least this many jobs waiting")
      ("json", po::bool_switch(), "print one JSON object instead of the table")
      ("strict-fair-share", po::bool_switch(),
       "fair share orders every pending job, the head too (the coordinator's --strict-fair-share), "
       "in both runs")
      ("metrics-ab", po::value<int>()->default_value(0),
       "instead: time N coordinator passes with metrics off and on (observer_ab.h) on --scale-nodes nodes")
      ("metrics-ab-pending", po::value<int>()->default_value(2000), "pending jobs in the metrics A/B");
  athanor::ParsedCommandLine cl;
  absl::Status parsed = athanor::ParseOptions(argc, argv, desc, "usage: athanor-bench-scheduler [flags]", &cl);
  if (!parsed.ok()) {
    std::cerr << parsed << "\n";
    return 2;
  }
  if (cl.help) return 0;
  const auto& vars = cl.vars;
  const bool json = vars["json"].as<bool>();
  if (const int ab = vars["metrics-ab"].as<int>(); ab > 0) {
    return athanor::bench::RunObserverAb(vars["scale-nodes"].as<int>(), vars["metrics-ab-pending"].as<int>(), ab) ? 0 : 1;
  }
  const uint32_t seed = vars["seed"].as<uint32_t>();

  auto trace = athanor::bench::LoadOpenbTrace(vars["traces"].as<std::string>());
  if (!trace.ok()) {
    std::cerr << "cannot load traces: " << trace.status() << " (use --traces DIR)\n";
    return 1;
  }
  const int gangs = vars["gangs"].as<int>();
  const double compress = vars["compress"].as<double>();
  int64_t span = trace->jobs.empty() ? 1 : trace->jobs.back().arrival_s - trace->jobs.front().arrival_s;
  athanor::bench::AddSyntheticGangs(*trace, gangs, span, seed);
  athanor::bench::Workload compressed = *trace;
  athanor::bench::CompressArrivals(compressed, compress);

  athanor::sched::SchedulerOptions backfill_on;
  athanor::sched::SchedulerOptions backfill_off;
  backfill_off.backfill = false;
  backfill_on.strict_fair_share = backfill_off.strict_fair_share = vars["strict-fair-share"].as<bool>();
  // (label, json key, result); each workload with backfill, then the baseline.
  std::vector<std::tuple<std::string, std::string, ReplayResult>> rows;
  auto run_pair = [&](const std::string& label, const std::string& key,
                      const athanor::bench::Workload& w, int passes, int min_pending) {
    rows.emplace_back(label + " backfill", key, athanor::bench::Replay(w, backfill_on, passes, min_pending));
    rows.emplace_back(label + " strict (base)", key,
                      athanor::bench::Replay(w, backfill_off, passes, min_pending));
  };
  run_pair("trace x1", "trace", *trace, 0, 0);
  if (compress != 1.0) run_pair(absl::StrCat("trace x", compress), "trace_compressed", compressed, 0, 0);
  const int scale_nodes = vars["scale-nodes"].as<int>();
  athanor::bench::Workload scaled;
  if (scale_nodes > 0) {
    scaled.nodes = athanor::bench::SyntheticNodes(scale_nodes);
    athanor::bench::AddSyntheticJobs(scaled, vars["scale-jobs"].as<int>(), 3000, seed);
    run_pair(absl::StrCat(scale_nodes, " nodes"), "scaled", scaled, vars["scale-passes"].as<int>(),
             vars["scale-min-pending"].as<int>());
  }

  nlohmann::json out;
  out["trace"] = {{"nodes", trace->nodes.size()},
                  {"jobs", trace->jobs.size()},
                  {"synthetic_gangs", gangs},
                  {"arrival_compression", compress},
                  {"skipped_cpu_only", trace->skipped_cpu_only},
                  {"skipped_unscheduled", trace->skipped_unscheduled},
                  {"fractional_rounded_up", trace->rounded_fractional}};
  out["options"] = {{"strict_fair_share", backfill_on.strict_fair_share},
                    {"scale_min_pending", vars["scale-min-pending"].as<int>()}};
  if (scale_nodes > 0) {
    out["scaled_workload"] = {{"nodes", scale_nodes}, {"jobs", scaled.jobs.size()}};
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    out[std::get<1>(rows[i])][i % 2 == 0 ? "backfill" : "baseline_strict_order"] =
        ToJson(std::get<2>(rows[i]));
  }
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("openb trace: %zu nodes, %zu jobs (%d synthetic gangs); skipped %d CPU-only and %d "
              "never-scheduled pods; %d fractional pods rounded up to 1 GPU\n",
              trace->nodes.size(), trace->jobs.size(), gangs, trace->skipped_cpu_only,
              trace->skipped_unscheduled, trace->rounded_fractional);
  std::printf("%-30s %6s %6s %7s %11s %9s %9s %9s %6s %6s %7s %10s %10s %9s %9s %8s %8s %7s %8s\n",
              "run", "jobs", "unstrt", "preempt", "makespan_s", "wait_mean", "wait_p50", "wait_p95",
              "util", "utilL", "passes", "pass_p50us", "pass_p99us", "cpu_p50us", "cpu_p99us",
              "vis_p50", "vis_p99", "pending", "pend_min");
  for (const auto& [label, key, result] : rows) PrintRow(label, result);
  return 0;
}
