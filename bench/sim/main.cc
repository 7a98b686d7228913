// athanor-sim: the coordinator's scheduler core on a simulated clock,
// comparing scheduling policies on one workload: FIFO without backfill, FIFO
// with backfill and a reservation, the default, and least attained service.
// (docs/benchmarks.md, "Scheduler quality: athanor-sim")
//
//   athanor-sim [--traces DIR | --csv FILE] [--nodes N] [--jobs N] [--load L]
//               [--seed S] [--checkpoint-interval-s S] [--mtbf-s S]
//               [--monthly-gpu-h H [--credit-tenants A,B]] [--json] [--plots DIR]
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/sim/report.h"
#include "bench/sim/simulator.h"
#include "bench/sim/workload.h"
#include "common/options.h"

namespace {

using athanor::sim::ComparedPolicies;
using athanor::sim::CompressArrivals;
using athanor::sim::KeepNodes;
using athanor::sim::LoadJobsCsv;
using athanor::sim::LoadOpenb;
using athanor::sim::PolicyRun;
using athanor::sim::PolicySummary;
using athanor::sim::SimOptions;
using athanor::sim::SimResult;
using athanor::sim::Summarise;
using athanor::sim::Synthetic;
using athanor::sim::SyntheticOptions;
using athanor::sim::Workload;

absl::StatusOr<std::vector<double>> ParseThresholds(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(part, &v) || !(v > 0) || (!out.empty() && v <= out.back())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--las-thresholds-gpu-s: expected ascending positive GPU-seconds, got '", text, "'"));
    }
    out.push_back(v);
  }
  return out;
}

// The goal of docs/benchmarks.md, against FIFO without backfill (row 0).
nlohmann::json Goal(const std::vector<PolicySummary>& rows) {
  const PolicySummary& fifo = rows.front();
  nlohmann::json goal;
  bool all = true;
  for (const PolicySummary& s : rows) {
    double bound = s.policy == "las" ? 0.5 : s.policy == "default" ? 0.7 : 0;
    if (bound == 0) continue;
    const bool jct = s.jct_vs_baseline <= bound;
    const bool util = s.utilisation >= fifo.utilisation;
    const bool starve = s.starved == 0;
    goal[s.policy] = {{"jct_bound", bound}, {"jct_met", jct}, {"utilisation_met", util},
                      {"starvation_met", starve}};
    all = all && jct && util && starve;
  }
  goal["met"] = all;
  return goal;
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = athanor::po;
  std::string traces, csv, plots, thresholds, credit_tenants;
  SyntheticOptions synth;
  SimOptions sim;
  double compress = 1, keep_nodes = 1, min_run_time_s = 300, las_window_s = 300;
  int las_max_order = athanor::sched::LasOptions{}.max_order_preemptions;
  double las_recall_s = std::chrono::duration<double>(athanor::sched::LasOptions{}.recall_after).count();
  int64_t age_s = std::chrono::duration_cast<std::chrono::seconds>(athanor::sched::SchedulerOptions{}.age_limit).count();
  bool json = false, list_starved = false, keep_head = false, strict_fair_share = false;
  athanor::sim::StarvationRule starvation;
  po::options_description desc("athanor-sim");
  desc.add_options()
      ("traces", po::value(&traces), "folder with the openb CSVs (instead of the synthetic workload)")
      ("csv", po::value(&csv),
       "jobs as submit_time,num_gpus,duration[,tenant,priority,nodes[,min_nodes]] (instead of the synthetic "
       "workload; 0 < min_nodes < nodes: elastic)")
      ("nodes", po::value(&synth.nodes)->default_value(synth.nodes), "nodes of the synthetic or --csv cluster (<= 10000)")
      ("gpus-per-node", po::value(&synth.gpus_per_node)->default_value(synth.gpus_per_node), "GPUs per node")
      ("jobs", po::value(&synth.jobs)->default_value(synth.jobs), "synthetic jobs")
      ("load", po::value(&synth.load)->default_value(synth.load),
       "synthetic offered load: GPU-seconds asked / (cluster GPUs x arrival span)")
      ("tenants", po::value(&synth.tenants)->default_value(synth.tenants), "synthetic tenants")
      ("elastic-fraction", po::value(&synth.elastic_fraction)->default_value(0),
       "synthetic: this share of the multi-node gangs is elastic, down to half their nodes")
      ("compress", po::value(&compress)->default_value(1), "divide arrival times by this (> 1: more load)")
      ("keep-nodes", po::value(&keep_nodes)->default_value(1),
       "keep this fraction of the node list, evenly spread (< 1: more load)")
      ("seed", po::value<uint64_t>()->default_value(1), "seed of the synthetic workload and of node failures")
      ("checkpoint-interval-s", po::value(&sim.checkpoint_interval_s)->default_value(sim.checkpoint_interval_s),
       "jobs checkpoint this often; work since the last is lost when preempted or failed (0: never)")
      ("mtbf-s", po::value(&sim.mtbf_s)->default_value(0), "mean time between failures of one node (0: none)")
      ("repair-s", po::value(&sim.repair_s)->default_value(sim.repair_s), "a failed node is back after this")
      ("preempt-exit-s", po::value(&sim.preempt_exit_s)->default_value(sim.preempt_exit_s),
       "a preempted job releases its GPUs this long after the decision")
      ("tick-s", po::value(&sim.tick_s)->default_value(sim.tick_s), "a pass at least this often while jobs wait")
      ("monthly-gpu-h", po::value(&sim.monthly_gpu_h)->default_value(0),
       "each tenant with a plan gets this many GPU-hours at the start of each month; out of them, its "
       "jobs are held and its running attempts stopped until the next month (0: no plans)")
      ("credit-tenants", po::value(&credit_tenants),
       "with --monthly-gpu-h: the tenants with a plan, comma-separated (default: every tenant)")
      ("limit-factor", po::value(&sim.limit_factor)->default_value(sim.limit_factor),
       "each job declares a time limit of this times its run time (0: none; backfill uses it)")
      ("min-run-time-s", po::value(&min_run_time_s)->default_value(min_run_time_s),
       "a job runs at least this long before it may be preempted")
      ("las-thresholds-gpu-s", po::value(&thresholds)->default_value("36000,360000"),
       "LAS queue boundaries in attained GPU-seconds, ascending")
      ("las-checkpoint-window-s", po::value(&las_window_s)->default_value(las_window_s),
       "LAS: a running job may be preempted for order only this long after its checkpoint (0: never)")
      ("las-max-order-preemptions", po::value(&las_max_order)->default_value(las_max_order),
       "LAS: preempt one job for order at most this often (0: never)")
      ("las-recall-after-s", po::value(&las_recall_s)->default_value(las_recall_s),
       "LAS: a job preempted for order and pending this long takes GPUs back from jobs of its class "
       "started since (0: never)")
      ("age-limit-s", po::value(&age_s)->default_value(age_s),
       "default and LAS: a job pending this long goes ahead of every class and tenant (0: never)")
      ("keep-head", po::bool_switch(&keep_head),
       "default policy with --strict-fair-share: the job holding the reservation keeps it until it "
       "starts (as the coordinator's --keep-head)")
      ("strict-fair-share", po::bool_switch(&strict_fair_share),
       "default policy: fair share orders every pending job, the head too (as the coordinator's "
       "--strict-fair-share)")
      ("starvation-run-fraction", po::value(&starvation.run_fraction)->default_value(0),
       "also floor the fifo delay a job is compared with at this fraction of its run time (0: only at 60 s)")
      ("json", po::bool_switch(&json), "print one JSON object instead of the table")
      ("starved", po::bool_switch(&list_starved),
       "list each policy's starved jobs (queued > 3x fifo's; job = index in the workload): size, waits, "
       "preemptions (with --json: \"starved_jobs\")")
      ("plots", po::value(&plots), "write plot data, plots.gp and PNGs (gnuplot) into this folder");
  athanor::ParsedCommandLine cl;
  absl::Status parsed = athanor::ParseOptions(
      argc, argv, desc,
      "usage: athanor-sim [--traces DIR | --csv FILE] [flags]\n"
      "Replays a workload through the coordinator's scheduler under four policies (fifo, "
      "fifo-backfill, default, las)\nand prints JCT, queueing, utilisation, fragmentation, lost "
      "work and pass times per policy.\nWithout --traces or --csv it generates the synthetic gang "
      "workload.",
      &cl);
  if (!parsed.ok()) {
    std::cerr << "athanor-sim: " << parsed.message() << "\n";
    return 2;
  }
  if (cl.help) return 0;
  synth.seed = sim.seed = cl.vars["seed"].as<uint64_t>();
  if (!traces.empty() && !csv.empty()) {
    std::cerr << "athanor-sim: --traces and --csv exclude each other\n";
    return 2;
  }
  if (!(keep_nodes > 0) || keep_nodes > 1) {
    std::cerr << "athanor-sim: --keep-nodes must be in (0, 1]\n";
    return 2;
  }
  if (!(starvation.run_fraction >= 0) || starvation.run_fraction > 1) {
    std::cerr << "athanor-sim: --starvation-run-fraction must be in [0, 1]\n";
    return 2;
  }
  if (!(compress > 0) || min_run_time_s < 0 || las_window_s < 0 || las_max_order < 0 || age_s < 0 ||
      !(las_recall_s >= 0)) {
    std::cerr << "athanor-sim: --compress must be > 0; --min-run-time-s, --las-checkpoint-window-s, "
                 "--las-max-order-preemptions, --las-recall-after-s and --age-limit-s >= 0\n";
    return 2;
  }
  if (!(sim.monthly_gpu_h >= 0) || sim.monthly_gpu_h > 1e9) {
    std::cerr << "athanor-sim: --monthly-gpu-h must be in [0, 1e9]\n";
    return 2;
  }
  if (!credit_tenants.empty() && !(sim.monthly_gpu_h > 0)) {
    std::cerr << "athanor-sim: --credit-tenants needs --monthly-gpu-h\n";
    return 2;
  }
  for (absl::string_view tenant : absl::StrSplit(credit_tenants, ',', absl::SkipEmpty())) {
    sim.credit_tenants.emplace_back(tenant);
  }
  auto las_thresholds = ParseThresholds(thresholds);
  if (!las_thresholds.ok()) {
    std::cerr << "athanor-sim: " << las_thresholds.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<Workload> workload = !traces.empty() ? LoadOpenb(traces)
                                      : !csv.empty()  ? LoadJobsCsv(csv, synth.nodes, synth.gpus_per_node)
                                                      : Synthetic(synth);
  if (!workload.ok()) {
    std::cerr << "athanor-sim: " << workload.status().message() << "\n";
    return 1;
  }
  CompressArrivals(*workload, compress);
  KeepNodes(*workload, keep_nodes);

  athanor::sched::SchedulerOptions base;
  base.min_run_time = athanor::Seconds(min_run_time_s);
  base.las.thresholds_gpu_s = *las_thresholds;
  base.las.checkpoint_window = athanor::Seconds(las_window_s);
  base.las.max_order_preemptions = las_max_order;
  base.las.recall_after = athanor::Seconds(las_recall_s);
  base.age_limit = athanor::Seconds(age_s);
  base.keep_head = keep_head;
  base.strict_fair_share = strict_fair_share;
  std::vector<SimResult> results;
  for (const PolicyRun& policy : ComparedPolicies(base)) {
    auto result = Simulate(*workload, policy, sim);
    if (!result.ok()) {
      std::cerr << "athanor-sim: " << policy.name << ": " << result.status().message() << "\n";
      return 1;
    }
    results.push_back(std::move(*result));
  }
  std::vector<PolicySummary> rows;
  for (const SimResult& r : results) rows.push_back(Summarise(r, results.front(), starvation));

  if (json) {
    nlohmann::json out = {
        {"workload",
         {{"name", workload->name}, {"nodes", workload->nodes.size()},
          {"gpus", workload->total_gpus()}, {"jobs", workload->jobs.size()}, {"notes", workload->notes}}},
        {"options",
         {{"seed", sim.seed}, {"checkpoint_interval_s", sim.checkpoint_interval_s}, {"mtbf_s", sim.mtbf_s},
          {"repair_s", sim.repair_s}, {"preempt_exit_s", sim.preempt_exit_s}, {"tick_s", sim.tick_s},
          {"limit_factor", sim.limit_factor}, {"min_run_time_s", min_run_time_s},
          {"monthly_gpu_h", sim.monthly_gpu_h}, {"credit_tenants", sim.credit_tenants},
          {"las_thresholds_gpu_s", *las_thresholds}, {"las_checkpoint_window_s", las_window_s},
          {"las_max_order_preemptions", las_max_order}, {"las_recall_after_s", las_recall_s},
          {"age_limit_s", age_s},
          {"keep_head", keep_head}, {"strict_fair_share", strict_fair_share},
          {"starvation_run_fraction", starvation.run_fraction}}},
        {"policies", athanor::sim::ToJson(rows)},
        {"goal", Goal(rows)}};
    if (list_starved) {
      for (size_t i = 1; i < results.size(); ++i) {
        out["starved_jobs"][results[i].policy] = athanor::sim::StarvedToJson(results[i], results.front(), starvation);
      }
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "workload " << workload->name << ": " << workload->jobs.size() << " jobs on "
              << workload->nodes.size() << " nodes, " << workload->total_gpus() << " GPUs\n";
    for (const std::string& note : workload->notes) std::cout << "  " << note << "\n";
    std::cout << "checkpoint every " << sim.checkpoint_interval_s << " s, node MTBF "
              << (sim.mtbf_s > 0 ? absl::StrCat(sim.mtbf_s, " s") : "none")
              << (sim.monthly_gpu_h > 0
                      ? absl::StrCat(", ", sim.monthly_gpu_h, " GPU-h a month for ",
                                     sim.credit_tenants.empty() ? std::string("every tenant")
                                                                : absl::StrJoin(sim.credit_tenants, ","))
                      : std::string())
              << ", seed " << sim.seed
              << "; x_fifo, starved and worst_q are against fifo (no backfill)\n\n";
    athanor::sim::PrintTable(std::cout, rows);
    std::cout << "\ngoal (las <= 0.5x fifo's mean JCT, default <= 0.7x, utilisation no lower, no job "
                 "queued > 3x fifo's, floored at 60 s"
              << (starvation.run_fraction > 0 ? absl::StrCat(" and ", starvation.run_fraction, " of its run time") : "")
              << "): " << Goal(rows).dump() << "\n";
    if (list_starved) {
      std::cout << "\nstarved jobs (first_h: until the first start; fifo_q_h: queued under fifo; ratio: queued over "
                   "fifo's, floored; cstop, cheld_h: stopped and held for want of credit)\n";
      for (size_t i = 1; i < results.size(); ++i) {
        athanor::sim::PrintStarved(std::cout, results[i], results.front(), starvation);
      }
    }
  }
  if (!plots.empty()) {
    absl::Status drawn = athanor::sim::WritePlots(plots, results);
    if (!drawn.ok()) std::cerr << "athanor-sim: " << drawn.message() << "\n";
  }
  return 0;
}
