#include "bench/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/sim/sim_random.h"
#include "common/status.h"

namespace athanor::sim {

namespace {

// One data row of a CSV: its 1-based line number and fields.
struct Row {
  size_t line = 0;
  std::vector<absl::string_view> fields;
};

// Splits `text` into a header and rows, skipping blank lines. The header must
// start with `header_start`, so a file of the wrong kind fails at line 1.
absl::StatusOr<std::vector<Row>> SplitCsv(absl::string_view text, const std::string& origin,
                                          absl::string_view header_start,
                                          std::vector<absl::string_view>* header) {
  std::vector<Row> rows;
  size_t line_no = 0;
  bool seen_header = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!seen_header) {
      if (line.substr(0, header_start.size()) != header_start) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ":", line_no, ": expected a header starting '",
                                                       header_start, "'"));
      }
      *header = absl::StrSplit(line, ',');
      seen_header = true;
      continue;
    }
    if (rows.size() >= static_cast<size_t>(kMaxJobs)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ":", line_no, ": more than ", kMaxJobs, " rows"));
    }
    rows.push_back({line_no, absl::StrSplit(line, ',')});
  }
  if (!seen_header) return absl::InvalidArgumentError(absl::StrCat(origin, ": empty; expected a header"));
  return rows;
}

absl::Status FieldError(const std::string& origin, const Row& row, absl::string_view field,
                        const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ":", row.line, ": field '", field, "': ", what));
}

// The integer in field `index` (named `name`), within [lo, hi].
absl::StatusOr<int64_t> IntField(const std::string& origin, const Row& row, size_t index,
                                 absl::string_view name, int64_t lo, int64_t hi) {
  int64_t v = 0;
  absl::string_view text = row.fields[index];
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return FieldError(origin, row, name,
                      absl::StrCat("expected an integer in [", lo, ", ", hi, "], got '", text, "'"));
  }
  return v;
}

absl::Status CheckFieldCount(const std::string& origin, const Row& row, size_t min, size_t max) {
  if (row.fields.size() < min || row.fields.size() > max) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ":", row.line, ": ", row.fields.size(),
                                                   " fields, expected ",
                                                   min == max ? absl::StrCat(min) : absl::StrCat(min, " to ", max)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", kMaxFileBytes, " bytes"));
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return absl::DataLossError(absl::StrCat("short read of ", path));
  return text;
}

void SortBySubmit(Workload& w) {
  std::stable_sort(w.jobs.begin(), w.jobs.end(), [](const SimJob& a, const SimJob& b) {
    return a.submit_s < b.submit_s;
  });
}

}  // namespace

int64_t Workload::total_gpus() const {
  int64_t n = 0;
  for (const sched::NodeSpec& node : nodes) n += node.gpus;
  return n;
}

absl::StatusOr<Workload> ParseOpenb(absl::string_view nodes_csv, absl::string_view pods_csv,
                                    const std::string& origin) {
  Workload w;
  w.name = "openb";
  const std::string node_origin = origin + "/openb_node_list_gpu_node.csv";
  const std::string pod_origin = origin + "/openb_pod_list_default.csv";
  std::vector<absl::string_view> header;
  ASSIGN_OR_RETURN(std::vector<Row> node_rows, SplitCsv(nodes_csv, node_origin, "sn,", &header));
  if (node_rows.size() > static_cast<size_t>(kMaxNodes)) {
    return absl::InvalidArgumentError(absl::StrCat(node_origin, ": more than ", kMaxNodes, " nodes"));
  }
  for (const Row& row : node_rows) {
    RETURN_IF_ERROR(CheckFieldCount(node_origin, row, 5, 5));
    sched::NodeSpec spec;
    spec.name = std::string(row.fields[0]);
    if (spec.name.empty()) return FieldError(node_origin, row, "sn", "empty");
    ASSIGN_OR_RETURN(int64_t cpu_milli, IntField(node_origin, row, 1, "cpu_milli", 0, 100'000'000));
    ASSIGN_OR_RETURN(spec.memory_mb, IntField(node_origin, row, 2, "memory_mib", 0, int64_t{1} << 40));
    ASSIGN_OR_RETURN(int64_t gpus, IntField(node_origin, row, 3, "gpu", 1, kMaxGpusPerNode));
    spec.cpus = static_cast<int>(cpu_milli / 1000);
    spec.gpus = static_cast<int>(gpus);
    spec.gpu_model = std::string(row.fields[4]);
    const size_t index = w.nodes.size();
    spec.labels["switch"] = absl::StrCat("sw", index / 16);
    spec.labels["rack"] = absl::StrCat("rack", index / 64);
    w.nodes.push_back(std::move(spec));
  }
  ASSIGN_OR_RETURN(std::vector<Row> pod_rows, SplitCsv(pods_csv, pod_origin, "name,", &header));
  int cpu_only = 0, unscheduled = 0, fractional = 0;
  for (const Row& row : pod_rows) {
    RETURN_IF_ERROR(CheckFieldCount(pod_origin, row, 11, 11));
    ASSIGN_OR_RETURN(int64_t gpus, IntField(pod_origin, row, 3, "num_gpu", 0, kMaxGpusPerNode));
    if (gpus == 0) {
      ++cpu_only;
      continue;
    }
    // The trace leaves scheduled_time empty for pods it never placed: they
    // have no run time to replay.
    if (row.fields[10].empty()) {
      ++unscheduled;
      continue;
    }
    ASSIGN_OR_RETURN(int64_t gpu_milli, IntField(pod_origin, row, 4, "gpu_milli", 0, 1000));
    ASSIGN_OR_RETURN(int64_t cpu_milli, IntField(pod_origin, row, 1, "cpu_milli", 0, 100'000'000));
    ASSIGN_OR_RETURN(int64_t memory, IntField(pod_origin, row, 2, "memory_mib", 0, int64_t{1} << 40));
    ASSIGN_OR_RETURN(int64_t created, IntField(pod_origin, row, 8, "creation_time", 0, kMaxSeconds));
    ASSIGN_OR_RETURN(int64_t deleted, IntField(pod_origin, row, 9, "deletion_time", 0, kMaxSeconds));
    ASSIGN_OR_RETURN(int64_t scheduled, IntField(pod_origin, row, 10, "scheduled_time", 0, kMaxSeconds));
    if (deleted < scheduled) {
      return FieldError(pod_origin, row, "deletion_time", "before scheduled_time");
    }
    if (gpu_milli < 1000) ++fractional;
    SimJob job;
    job.id = std::string(row.fields[0]);
    const absl::string_view qos = row.fields[6];
    job.tenant = qos.empty() ? "none" : std::string(qos);
    job.priority = (qos == "LS" || qos == "Guaranteed") ? 1 : 0;
    job.gpus_per_node = static_cast<int>(gpus);
    job.cpus_per_node = static_cast<int>((cpu_milli + 999) / 1000);
    job.memory_mb_per_node = memory;
    // A '|' list of models is not a constraint the scheduler can express:
    // such pods take any model.
    if (!row.fields[5].empty() && row.fields[5].find('|') == absl::string_view::npos) {
      job.gpu_model = std::string(row.fields[5]);
    }
    job.submit_s = created;
    job.duration_s = std::max<int64_t>(1, deleted - scheduled);
    w.jobs.push_back(std::move(job));
  }
  SortBySubmit(w);
  w.notes.push_back(absl::StrCat(fractional, " fractional-GPU pods rounded up to one whole GPU each (not packed)"));
  w.notes.push_back(absl::StrCat(cpu_only, " CPU-only pods and ", unscheduled,
                                 " pods the trace never scheduled skipped"));
  return w;
}

absl::StatusOr<Workload> LoadOpenb(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string nodes, ReadFile(dir + "/openb_node_list_gpu_node.csv"));
  ASSIGN_OR_RETURN(std::string pods, ReadFile(dir + "/openb_pod_list_default.csv"));
  return ParseOpenb(nodes, pods, dir);
}

std::vector<sched::NodeSpec> UniformNodes(int count, int gpus) {
  std::vector<sched::NodeSpec> nodes;
  nodes.reserve(static_cast<size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i) {
    sched::NodeSpec spec;
    spec.name = absl::StrCat("node-", i);
    spec.gpus = gpus;
    spec.gpu_model = "H100";
    spec.gpu_memory_mb = 81920;
    spec.cpus = 16 * gpus;
    spec.memory_mb = int64_t{128} * 1024 * gpus;
    spec.labels["switch"] = absl::StrCat("sw", i / 32);
    spec.labels["rack"] = absl::StrCat("rack", i / 256);
    nodes.push_back(std::move(spec));
  }
  return nodes;
}

absl::StatusOr<Workload> ParseJobsCsv(absl::string_view text, const std::string& origin,
                                      int node_count, int gpus_per_node) {
  if (node_count < 1 || node_count > kMaxNodes || gpus_per_node < 1 || gpus_per_node > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(absl::StrCat("cluster of ", node_count, " x ", gpus_per_node,
                                                   " GPUs: need 1..", kMaxNodes, " nodes of 1..",
                                                   kMaxGpusPerNode, " GPUs"));
  }
  Workload w;
  w.name = "csv";
  w.nodes = UniformNodes(node_count, gpus_per_node);
  const int64_t cluster_gpus = int64_t{node_count} * gpus_per_node;
  std::vector<absl::string_view> header;
  ASSIGN_OR_RETURN(std::vector<Row> rows, SplitCsv(text, origin, "submit_time,", &header));
  static constexpr absl::string_view kColumns[] = {"submit_time", "num_gpus", "duration", "tenant",
                                                  "priority",    "nodes",    "min_nodes"};
  if (header.size() < 3 || header.size() > 7 ||
      !std::equal(header.begin(), header.end(), std::begin(kColumns))) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": header must be submit_time,num_gpus,duration[,tenant,priority,nodes[,min_nodes]], got '",
        absl::StrJoin(header, ","), "'"));
  }
  for (const Row& row : rows) {
    RETURN_IF_ERROR(CheckFieldCount(origin, row, header.size(), header.size()));
    SimJob job;
    job.id = absl::StrCat("job-", w.jobs.size());
    ASSIGN_OR_RETURN(job.submit_s, IntField(origin, row, 0, "submit_time", 0, kMaxSeconds));
    ASSIGN_OR_RETURN(int64_t gpus, IntField(origin, row, 1, "num_gpus", 1, cluster_gpus));
    ASSIGN_OR_RETURN(job.duration_s, IntField(origin, row, 2, "duration", 1, kMaxSeconds));
    if (header.size() > 3) {
      if (row.fields[3].empty()) return FieldError(origin, row, "tenant", "empty");
      job.tenant = std::string(row.fields[3]);
    }
    if (header.size() > 4) {
      ASSIGN_OR_RETURN(int64_t priority, IntField(origin, row, 4, "priority", -1000, 1000));
      job.priority = static_cast<int>(priority);
    }
    int64_t nodes = 0;
    if (header.size() > 5) {
      ASSIGN_OR_RETURN(nodes, IntField(origin, row, 5, "nodes", 1, node_count));
      if (gpus % nodes != 0 || gpus / nodes > gpus_per_node) {
        return FieldError(origin, row, "nodes",
                          absl::StrCat(gpus, " GPUs do not split evenly into ", nodes,
                                       " node(s) of at most ", gpus_per_node));
      }
    } else if (gpus <= gpus_per_node) {
      nodes = 1;
    } else if (gpus % gpus_per_node != 0) {
      return FieldError(origin, row, "num_gpus",
                        absl::StrCat(gpus, " is more than one node's ", gpus_per_node,
                                     " and not a multiple of it"));
    } else {
      nodes = gpus / gpus_per_node;
    }
    job.nodes = static_cast<int>(nodes);
    job.gpus_per_node = static_cast<int>(gpus / nodes);
    if (header.size() > 6) {  // 0 or `nodes`: fixed; between: elastic
      ASSIGN_OR_RETURN(int64_t least, IntField(origin, row, 6, "min_nodes", 0, nodes));
      job.min_nodes = static_cast<int>(least);
    }
    w.jobs.push_back(std::move(job));
  }
  SortBySubmit(w);
  return w;
}

absl::StatusOr<Workload> LoadJobsCsv(const std::string& path, int node_count, int gpus_per_node) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseJobsCsv(text, path, node_count, gpus_per_node);
}

absl::StatusOr<Workload> Synthetic(const SyntheticOptions& o) {
  if (o.nodes < 1 || o.nodes > 10'000 || o.gpus_per_node < 1 || o.gpus_per_node > kMaxGpusPerNode ||
      o.jobs < 1 || o.jobs > kMaxJobs || !(o.load > 0) || o.tenants < 1 || !(o.elastic_fraction >= 0) ||
      o.elastic_fraction > 1) {
    return absl::InvalidArgumentError(
        "synthetic workload: need 1..10000 nodes, 1..64 GPUs per node, 1..5000000 jobs, load > 0, "
        "tenants >= 1, elastic fraction in [0, 1]");
  }
  Workload w;
  w.name = "synthetic";
  w.nodes = UniformNodes(o.nodes, o.gpus_per_node);
  const int64_t cluster_gpus = int64_t{o.nodes} * o.gpus_per_node;
  SimRandom rng(o.seed);
  // Job sizes in GPUs and their weights: mostly one GPU, a long tail of
  // gangs of whole nodes (docs/benchmarks.md, "The synthetic workload").
  static constexpr struct { int gpus; double weight; } kSizes[] = {
      {1, 0.55}, {2, 0.08}, {4, 0.10}, {8, 0.14}, {16, 0.06},
      {32, 0.04}, {64, 0.02}, {128, 0.007}, {256, 0.002}, {512, 0.001}};
  // No job larger than a quarter of the cluster, so every one can start.
  const int64_t max_gpus = std::max<int64_t>(o.gpus_per_node, cluster_gpus / 4);
  double gpu_seconds = 0;
  for (int i = 0; i < o.jobs; ++i) {
    SimJob job;
    job.id = absl::StrCat("job-", i);
    double u = rng.Uniform(), acc = 0;
    int gpus = kSizes[0].gpus;
    for (const auto& size : kSizes) {
      acc += size.weight;
      gpus = size.gpus;
      if (u < acc) break;
    }
    gpus = static_cast<int>(std::min<int64_t>(gpus, max_gpus));
    if (gpus > o.gpus_per_node) {
      job.nodes = gpus / o.gpus_per_node;
      job.gpus_per_node = o.gpus_per_node;
    } else {
      job.gpus_per_node = gpus;
    }
    // Log-normal run time, heavy-tailed; larger jobs run longer.
    const double median_s = 1200.0 * (1.0 + 0.5 * std::log2(static_cast<double>(gpus)));
    const double d = median_s * std::exp(1.6 * rng.Normal());
    job.duration_s = static_cast<int64_t>(std::clamp(d, 60.0, 14.0 * 86400));
    // Tenants skewed: the first few submit most.
    const double t = rng.Uniform();
    job.tenant = absl::StrCat("t", static_cast<int>(t * t * o.tenants));
    gpu_seconds += static_cast<double>(job.duration_s) * job.total_gpus();
    w.jobs.push_back(std::move(job));
  }
  // Poisson arrivals over the span that offers `load` of the cluster.
  const double span_s = gpu_seconds / (o.load * static_cast<double>(cluster_gpus));
  const double mean_gap_s = span_s / o.jobs;
  double at = 0;
  for (SimJob& job : w.jobs) {
    job.submit_s = static_cast<int64_t>(at);
    at += rng.Exponential(mean_gap_s);
  }
  int elastic = 0;
  if (o.elastic_fraction > 0) {
    SimRandom pick(o.seed ^ 0x656c6173746963ULL);  // its own stream
    for (SimJob& job : w.jobs) {
      if (job.nodes > 1 && pick.Uniform() < o.elastic_fraction) {
        job.min_nodes = std::max(1, job.nodes / 2);
        ++elastic;
      }
    }
  }
  w.notes.push_back(absl::StrCat(o.jobs, " jobs on ", o.nodes, " x ", o.gpus_per_node,
                                 " GPUs, offered load ", o.load, ", seed ", o.seed,
                                 elastic > 0 ? absl::StrCat(", ", elastic, " elastic gangs") : ""));
  return w;
}

void CompressArrivals(Workload& w, double factor) {
  if (!(factor > 0) || factor == 1) return;
  for (SimJob& job : w.jobs) {
    job.submit_s = static_cast<int64_t>(static_cast<double>(job.submit_s) / factor);
  }
  w.notes.push_back(absl::StrCat("arrival times divided by ", factor));
}

void KeepNodes(Workload& w, double fraction) {
  if (!(fraction > 0) || fraction >= 1) return;
  std::vector<sched::NodeSpec> kept;
  double owed = 0;
  for (sched::NodeSpec& node : w.nodes) {
    owed += fraction;
    if (owed >= 1) {
      owed -= 1;
      kept.push_back(std::move(node));
    }
  }
  w.notes.push_back(absl::StrCat(kept.size(), " of ", w.nodes.size(), " nodes kept"));
  w.nodes = std::move(kept);
}

}  // namespace athanor::sim
