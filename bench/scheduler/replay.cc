#include "bench/scheduler/replay.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <queue>
#include <random>
#include <sstream>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::bench {

namespace {

using sched::JobRequest;
using sched::NodeSpec;

absl::StatusOr<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

int64_t ToInt(const std::string& s) {
  int64_t v = 0;
  return absl::SimpleAtoi(s, &v) ? v : -1;
}

double ThreadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

absl::StatusOr<Workload> LoadOpenbTrace(const std::string& dir) {
  Workload w;
  auto nodes = ReadCsv(dir + "/openb_node_list_gpu_node.csv");
  if (!nodes.ok()) return nodes.status();
  for (const auto& row : *nodes) {
    if (row.size() < 5) return absl::DataLossError(absl::StrCat("short node row in ", dir));
    NodeSpec spec;
    spec.name = row[0];
    spec.cpus = static_cast<int>(ToInt(row[1]) / 1000);
    spec.memory_mb = ToInt(row[2]);
    spec.gpus = static_cast<int>(ToInt(row[3]));
    spec.gpu_model = row[4];
    int index = static_cast<int>(w.nodes.size());
    spec.labels["switch"] = absl::StrCat("sw", index / 16);
    spec.labels["rack"] = absl::StrCat("rack", index / 64);
    w.nodes.push_back(spec);
  }
  auto pods = ReadCsv(dir + "/openb_pod_list_default.csv");
  if (!pods.ok()) return pods.status();
  for (const auto& row : *pods) {
    if (row.size() < 11) return absl::DataLossError(absl::StrCat("short pod row in ", dir));
    int64_t gpus = ToInt(row[3]);
    if (gpus <= 0) {
      ++w.skipped_cpu_only;
      continue;
    }
    int64_t created = ToInt(row[8]), deleted = ToInt(row[9]), scheduled = ToInt(row[10]);
    if (scheduled < 0 || deleted < 0) {
      ++w.skipped_unscheduled;
      continue;
    }
    if (ToInt(row[4]) < 1000) ++w.rounded_fractional;
    TraceJob job;
    JobRequest& r = job.request;
    r.id = row[0];
    r.tenant = row[6].empty() ? "none" : row[6];
    r.priority = (row[6] == "LS" || row[6] == "Guaranteed") ? 1 : 0;
    r.preemptible = r.priority == 0;
    r.nodes = 1;
    r.gpus_per_node = static_cast<int>(gpus);
    r.cpus_per_node = static_cast<int>((ToInt(row[1]) + 999) / 1000);
    r.memory_mb_per_node = ToInt(row[2]);
    if (!row[5].empty() && row[5].find('|') == std::string::npos) r.gpu_model = row[5];
    job.arrival_s = created;
    job.duration_s = std::max<int64_t>(1, deleted - scheduled);
    r.time_limit = std::chrono::seconds(job.duration_s);
    w.jobs.push_back(std::move(job));
  }
  std::stable_sort(w.jobs.begin(), w.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
  return w;
}

void CompressArrivals(Workload& w, double factor) {
  if (factor <= 0) return;
  for (TraceJob& job : w.jobs) {
    job.arrival_s = static_cast<int64_t>(static_cast<double>(job.arrival_s) / factor);
  }
}

void AddSyntheticGangs(Workload& w, int count, int64_t span_s, uint32_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    TraceJob job;
    JobRequest& r = job.request;
    r.id = absl::StrCat("gang-", i);
    r.tenant = "gangs";
    r.priority = 2;
    r.nodes = 2 + static_cast<int>(rng() % 7);
    r.gpus_per_node = 8;
    job.arrival_s = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(span_s, 1)));
    job.duration_s = 3600 + static_cast<int64_t>(rng() % (11 * 3600));
    r.time_limit = std::chrono::seconds(job.duration_s);
    w.jobs.push_back(std::move(job));
  }
  std::stable_sort(w.jobs.begin(), w.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
}

std::vector<NodeSpec> SyntheticNodes(int count) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < count; ++i) {
    NodeSpec spec;
    spec.name = absl::StrCat("node-", i);
    spec.gpus = 8;
    spec.gpu_model = "H100";
    spec.gpu_memory_mb = 81920;
    spec.cpus = 128;
    spec.memory_mb = 1 << 20;
    spec.labels["switch"] = absl::StrCat("sw", i / 32);
    spec.labels["rack"] = absl::StrCat("rack", i / 256);
    nodes.push_back(std::move(spec));
  }
  return nodes;
}

void AddSyntheticJobs(Workload& w, int count, int64_t span_s, uint32_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    TraceJob job;
    JobRequest& r = job.request;
    r.id = absl::StrCat("job-", i);
    r.tenant = absl::StrCat("t", rng() % 8);
    r.priority = static_cast<int>(rng() % 3);
    r.preemptible = rng() % 2;
    if (rng() % 100 < 85) {
      r.nodes = 1;
      r.gpus_per_node = 1 << (rng() % 4);
    } else {
      r.nodes = 2 + static_cast<int>(rng() % 15);
      r.gpus_per_node = 8;
    }
    r.cpus_per_node = 4 * r.gpus_per_node;
    job.arrival_s = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(span_s, 1)));
    job.duration_s = 600 + static_cast<int64_t>(rng() % 35400);
    r.time_limit = std::chrono::seconds(job.duration_s);
    w.jobs.push_back(std::move(job));
  }
  std::stable_sort(w.jobs.begin(), w.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
}

ReplayResult Replay(const Workload& w, const sched::SchedulerOptions& options, int max_passes,
                    int min_pending) {
  FakeClock clock;
  sched::Scheduler scheduler(&clock, options);
  int64_t total_gpus = 0;
  for (const NodeSpec& spec : w.nodes) {
    if (scheduler.AddNode(spec).ok()) total_gpus += spec.gpus;
  }
  struct Run {
    const TraceJob* job = nullptr;
    int64_t first_start = -1;
    int64_t remaining = 0;
    int64_t since = 0;
    int attempt = 0;
  };
  std::unordered_map<std::string, Run> runs;
  // (time, attempt, id): attempt < 0 marks a preempted job's exit.
  using Event = std::tuple<int64_t, int, std::string>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  ReplayResult result;
  std::vector<double> pass_us, pass_cpu_us, visited;
  size_t next = 0;
  int64_t now = w.jobs.empty() ? 0 : w.jobs.front().arrival_s;
  const int64_t first = now, base = now;
  int64_t last = now;
  int64_t busy_gpus = 0;
  double area = 0, area_at_last_start = 0;  // GPU-seconds
  int64_t last_start = now;
  while (next < w.jobs.size() || !events.empty()) {
    int64_t t = next < w.jobs.size() ? w.jobs[next].arrival_s : INT64_MAX;
    if (!events.empty()) t = std::min(t, std::get<0>(events.top()));
    clock.Advance(std::chrono::seconds(t - now));
    area += static_cast<double>(busy_gpus) * static_cast<double>(t - now);
    now = t;
    while (!events.empty() && std::get<0>(events.top()) == t) {
      auto [when, attempt, id] = events.top();
      events.pop();
      Run& run = runs[id];
      if (attempt < 0) {  // preempted: checkpointed at SIGTERM, requeued
        run.remaining -= t - run.since;
        ++run.attempt;
        busy_gpus -= run.job->request.total_gpus();
        (void)scheduler.OnJobExited(id, true);
      } else if (attempt == run.attempt) {
        busy_gpus -= run.job->request.total_gpus();
        (void)scheduler.OnJobExited(id, false);
        last = t;
      }
    }
    for (; next < w.jobs.size() && w.jobs[next].arrival_s == t; ++next) {
      const TraceJob& job = w.jobs[next];
      if (!scheduler.Submit(job.request).ok()) continue;
      Run& run = runs[job.request.id];
      run.job = &job;
      run.remaining = job.duration_s;
    }
    const size_t waiting = scheduler.view().pending();
    const bool timed = waiting >= static_cast<size_t>(std::max(min_pending, 0));
    const double cpu_start = ThreadCpuMicros();
    auto start = std::chrono::steady_clock::now();
    std::vector<sched::Decision> decisions = scheduler.Schedule();
    if (timed) {
      pass_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
      pass_cpu_us.push_back(ThreadCpuMicros() - cpu_start);
      visited.push_back(static_cast<double>(scheduler.view().last_pass().visited));
      if (pass_us.size() == 1 || static_cast<int>(waiting) < result.pending_min_timed) {
        result.pending_min_timed = static_cast<int>(waiting);
      }
    }
    for (const sched::Decision& d : decisions) {
      Run& run = runs[d.job];
      if (d.kind == sched::Decision::Kind::kStart) {
        if (run.first_start < 0) run.first_start = t;
        run.since = t;
        busy_gpus += run.job->request.total_gpus();
        last_start = t;
        area_at_last_start = area;
        events.emplace(t + std::max<int64_t>(run.remaining, 1), run.attempt, d.job);
      } else {
        ++result.preemptions;
        events.emplace(t + std::min<int64_t>(30, std::chrono::duration_cast<std::chrono::seconds>(d.grace).count()), -1, d.job);
      }
    }
    if (max_passes > 0 && static_cast<int>(pass_us.size()) >= max_passes) break;
  }
  std::vector<double> waits;
  for (const auto& [id, run] : runs) {
    if (run.first_start < 0) {
      ++result.unfinished;
      continue;
    }
    waits.push_back(static_cast<double>(run.first_start - run.job->arrival_s));
  }
  result.jobs = static_cast<int>(waits.size());
  result.makespan_s = static_cast<double>(last - first);
  double sum = 0;
  for (double v : waits) sum += v;
  result.wait_mean_s = waits.empty() ? 0 : sum / static_cast<double>(waits.size());
  result.wait_median_s = Percentile(waits, 0.5);
  result.wait_p95_s = Percentile(waits, 0.95);
  double busy = 0;
  for (const auto& row : scheduler.view().accounting().Usage(clock.Now())) {
    if (row.job.empty()) busy += row.gpu_seconds;
  }
  double span = static_cast<double>(now - base);
  result.gpu_utilisation = total_gpus > 0 && span > 0 ? busy / (static_cast<double>(total_gpus) * span) : 0;
  double loaded = static_cast<double>(last_start - base);
  result.gpu_utilisation_loaded =
      total_gpus > 0 && loaded > 0 ? area_at_last_start / (static_cast<double>(total_gpus) * loaded) : 0;
  result.passes = static_cast<int>(pass_us.size());
  result.pass_median_us = Percentile(pass_us, 0.5);
  result.pass_p99_us = Percentile(pass_us, 0.99);
  result.pass_max_us = pass_us.empty() ? 0 : *std::max_element(pass_us.begin(), pass_us.end());
  result.pass_cpu_median_us = Percentile(pass_cpu_us, 0.5);
  result.pass_cpu_p99_us = Percentile(pass_cpu_us, 0.99);
  result.visited_median = Percentile(visited, 0.5);
  result.visited_p99 = Percentile(visited, 0.99);
  result.pending_at_end = static_cast<int>(scheduler.view().pending());
  return result;
}

}  // namespace athanor::bench
