// Workloads for athanor-sim: a node list and a stream of job arrivals, read
// from the openb trace, from a generic CSV, or made by the built-in generator
// of multi-node gang workloads (docs/benchmarks.md, "Scheduler quality").
//
// Everything read from a file is checked: each row's field count, each
// number's syntax and range, with errors naming the file, line and field.
// Pure functions; no state between calls.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sim {

struct SimJob {
  std::string id;
  std::string tenant = "t0";
  int priority = 0;
  int nodes = 1;
  int gpus_per_node = 1;
  int cpus_per_node = 0;
  int64_t memory_mb_per_node = 0;
  std::string gpu_model;  // empty: any
  int64_t submit_s = 0;
  int64_t duration_s = 1;  // run time on all `nodes` when never interrupted
  // Elastic (0 < min_nodes < nodes): runs on min_nodes..nodes nodes, its work
  // (duration_s x nodes node-seconds) going as fast as the nodes it holds.
  int min_nodes = 0;
  int total_gpus() const { return nodes * gpus_per_node; }
  bool elastic() const { return min_nodes > 0 && min_nodes < nodes; }
};

struct Workload {
  std::string name;
  std::vector<sched::NodeSpec> nodes;
  std::vector<SimJob> jobs;         // by submit time, then id
  std::vector<std::string> notes;   // what the loader did: rounding, rows skipped
  int64_t total_gpus() const;
};

// Caps on what a file may ask for: beyond them a row is refused, not clamped.
inline constexpr int64_t kMaxJobs = 5'000'000;
inline constexpr int64_t kMaxNodes = 100'000;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int64_t kMaxSeconds = 10LL * 365 * 86400;  // times and durations
inline constexpr size_t kMaxFileBytes = size_t{1} << 30;

// The openb CSVs in `dir` (openb_node_list_gpu_node.csv,
// openb_pod_list_default.csv; layout in their README). CPU-only pods and pods
// the trace never scheduled are skipped; a fractional-GPU pod (gpu_milli <
// 1000) is rounded up to one whole GPU; run time = deletion - scheduled;
// qos LS and Guaranteed get priority 1, the rest 0; tenant = qos.
absl::StatusOr<Workload> LoadOpenb(const std::string& dir);
// The same from the two files' text (`origin` names them in errors).
absl::StatusOr<Workload> ParseOpenb(absl::string_view nodes_csv, absl::string_view pods_csv,
                                    const std::string& origin);

// Generic jobs: a header, then
// `submit_time,num_gpus,duration[,tenant,priority,nodes[,min_nodes]]` (seconds;
// num_gpus in total; min_nodes between 1 and nodes - 1 makes the job elastic,
// 0 or nodes keeps it fixed). Without `nodes`, a job of up to
// `gpus_per_node` GPUs takes one node and a larger one whole nodes (num_gpus
// must then be a multiple); with it, num_gpus must divide evenly. Runs on
// `node_count` uniform nodes.
absl::StatusOr<Workload> ParseJobsCsv(absl::string_view text, const std::string& origin,
                                      int node_count, int gpus_per_node);
absl::StatusOr<Workload> LoadJobsCsv(const std::string& path, int node_count, int gpus_per_node);

// The built-in gang workload (docs/benchmarks.md says how it is shaped).
struct SyntheticOptions {
  int nodes = 256;
  int gpus_per_node = 8;
  int jobs = 4000;
  double load = 1.2;  // offered GPU-seconds / (cluster GPUs x arrival span)
  int tenants = 8;
  uint64_t seed = 1;
  // This share of the multi-node gangs is elastic, down to half their nodes
  // (drawn apart from the rest: the same seed gives the same jobs for any
  // share).
  double elastic_fraction = 0;
};
absl::StatusOr<Workload> Synthetic(const SyntheticOptions& options);

// `count` identical nodes of `gpus` GPUs, 32 to a switch.
std::vector<sched::NodeSpec> UniformNodes(int count, int gpus);

// Divides submit times by `factor` (> 1 raises the offered load).
void CompressArrivals(Workload& workload, double factor);
// Keeps `fraction` (0, 1] of the nodes, evenly spread over the list so that
// its mix of models stays: a trace's jobs on a smaller cluster.
void KeepNodes(Workload& workload, double fraction);

}  // namespace athanor::sim
