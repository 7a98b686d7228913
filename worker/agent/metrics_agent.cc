#include "worker/agent/metrics_agent.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace athanor::agent {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

struct GroupUsage {
  double cpu_seconds = 0;
  double rss_bytes = 0;
};

// CPU seconds (utime+stime+cutime+cstime) and resident bytes of every
// process, by process group, from one pass over /proc.
std::map<pid_t, GroupUsage> UsageByGroup(const std::set<pid_t>& groups) {
  std::map<pid_t, GroupUsage> out;
  if (groups.empty()) return out;
  static const long ticks = sysconf(_SC_CLK_TCK);
  static const long page = sysconf(_SC_PAGESIZE);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    // After "pid (comm) ": state(0) ppid(1) pgrp(2) ... utime(11) stime(12)
    // cutime(13) cstime(14) ... rss(21).
    if (f.size() < 22) continue;
    int pgid = 0;
    if (!absl::SimpleAtoi(f[2], &pgid) || !groups.count(pgid)) continue;
    double t[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) {
      if (!absl::SimpleAtod(f[11 + i], &t[i])) t[i] = 0;
    }
    double rss = 0;
    if (!absl::SimpleAtod(f[21], &rss)) rss = 0;
    GroupUsage& g = out[pgid];
    g.cpu_seconds += (t[0] + t[1] + t[2] + t[3]) / static_cast<double>(ticks);
    g.rss_bytes += rss * static_cast<double>(page);
  }
  closedir(proc);
  return out;
}

// `out` has room reserved (Update): references to earlier families stay valid.
MetricFamily& Family(std::vector<MetricFamily>& out, const char* name, const char* help, MetricType type) {
  ATHANOR_CHECK(out.size() < out.capacity()) << "reserve more families in AgentMetrics::Update";
  out.push_back(MetricFamily{name, help, type, {}});
  return out.back();
}

void Add(MetricFamily& f, std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) {
    m.counter.value = v;
  } else {
    m.gauge.value = v;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

const char* AgentMetrics::ExitCause(const RankStatusReport& r) {
  if (r.phase == RankPhase::kFailedToStart) return "failed_to_start";
  if (r.message == "out of memory") return "oom";
  if (r.signal != 0) return "signal";
  return r.exit_code == 0 ? "success" : "error";
}

void AgentMetrics::Update(const std::vector<RankStatusReport>& reports, const GpuReadings* gpus,
                          const std::map<std::pair<std::string, int32_t>, StepSample>& telemetry,
                          uint64_t telemetry_dropped) {
  int running = 0;
  std::set<RankKey> present;
  std::set<pid_t> groups;
  std::map<pid_t, std::string> group_job;
  for (const RankStatusReport& r : reports) {
    present.insert(r.key);
    if (r.phase == RankPhase::kRunning) {
      ++running;
      if (r.pid > 0) {
        groups.insert(r.pid);
        group_job[r.pid] = r.key.job_id;
      }
    } else if (counted_.insert(r.key).second) {
      ++exits_[ExitCause(r)];
    }
  }
  // Forget ranks that left the desired set (they are reported no more).
  for (auto it = counted_.begin(); it != counted_.end();) it = present.count(*it) ? std::next(it) : counted_.erase(it);

  std::vector<MetricFamily> out;
  out.reserve(21);
  Add(Family(out, "athanor_agent_ranks_running", "Ranks this agent runs now.", MetricType::Gauge), {}, running);
  MetricFamily& exits = Family(out, "athanor_agent_rank_exits_total",
                               "Rank exits seen by this agent, by cause (success, error, signal, oom, failed_to_start).",
                               MetricType::Counter);
  for (const char* cause : {"success", "error", "signal", "oom", "failed_to_start"}) {
    auto it = exits_.find(cause);
    Add(exits, {{"cause", cause}}, it == exits_.end() ? 0 : static_cast<double>(it->second));
  }
  if (gpus != nullptr) {
    MetricFamily& util = Family(out, "athanor_agent_gpu_utilization_ratio",
                                "GPU utilisation by device (nvidia-smi), 0..1.", MetricType::Gauge);
    for (const auto& [i, v] : gpus->utilization) Add(util, {{"gpu", std::to_string(i)}}, v / 100.0);
    MetricFamily& mem = Family(out, "athanor_agent_gpu_memory_used_bytes",
                               "GPU memory in use by device (nvidia-smi).", MetricType::Gauge);
    for (const auto& [i, v] : gpus->memory_used_mb) Add(mem, {{"gpu", std::to_string(i)}}, v * 1024 * 1024);
  }
  std::map<std::string, GroupUsage> per_job;
  for (const auto& [pgid, u] : UsageByGroup(groups)) {
    GroupUsage& j = per_job[group_job[pgid]];
    j.cpu_seconds += u.cpu_seconds;
    j.rss_bytes += u.rss_bytes;
  }
  MetricFamily& cpu = Family(out, "athanor_agent_job_cpu_seconds_total",
                             "CPU time of a job's running ranks on this node.", MetricType::Counter);
  MetricFamily& rss = Family(out, "athanor_agent_job_memory_bytes",
                             "Resident memory of a job's running ranks on this node.", MetricType::Gauge);
  for (const auto& [job, u] : per_job) {
    Add(cpu, {{"job_id", job}}, u.cpu_seconds);
    Add(rss, {{"job_id", job}}, u.rss_bytes);
  }
  MetricFamily& step = Family(out, "athanor_agent_job_steps_total",
                              "Newest training step rank 0 reported over the telemetry socket.", MetricType::Counter);
  MetricFamily& loss = Family(out, "athanor_agent_job_loss", "Loss of that step.", MetricType::Gauge);
  MetricFamily& tps = Family(out, "athanor_agent_job_tokens_per_second", "Tokens per second of that step.",
                             MetricType::Gauge);
  for (const auto& [key, s] : telemetry) {
    std::vector<ClientMetric::Label> l = {{"job_id", key.first}, {"attempt", std::to_string(key.second)}};
    Add(step, l, static_cast<double>(s.step));
    Add(loss, l, s.loss);
    Add(tps, l, s.tokens_per_s);
  }
  MetricFamily& uploads = Family(out, "athanor_agent_checkpoint_uploads_total",
                                 "Checkpoint shards uploaded from this node, by uploader (rank: ranks that "
                                 "upload their own; service: the node checkpoint service) and result.",
                                 MetricType::Counter);
  MetricFamily& up_bytes = Family(out, "athanor_agent_checkpoint_upload_bytes_total",
                                  "Bytes of the checkpoint shards uploaded from this node, by uploader.",
                                  MetricType::Counter);
  MetricFamily& up_seconds = Family(out, "athanor_agent_checkpoint_upload_seconds_total",
                                    "Time spent uploading those shards, by uploader.", MetricType::Counter);
  auto add_uploads = [&](const char* uploader, const UploadFigures& f, bool with_failures) {
    Add(uploads, {{"uploader", uploader}, {"result", "ok"}}, static_cast<double>(f.uploads));
    if (with_failures) {
      Add(uploads, {{"uploader", uploader}, {"result", "failed"}}, static_cast<double>(f.failures));
    }
    Add(up_bytes, {{"uploader", uploader}}, f.bytes);
    Add(up_seconds, {{"uploader", uploader}}, f.seconds);
  };
  add_uploads("rank", ckpt_by_ranks_, false);
  if (ckpt_by_service_.has_value()) add_uploads("service", *ckpt_by_service_, true);
  if (images_.has_value()) {
    Add(Family(out, "athanor_agent_image_cache_hits_total", "Rank starts that found their image unpacked here (after its fetch too).",
               MetricType::Counter), {}, static_cast<double>(images_->hits));
    Add(Family(out, "athanor_agent_image_cache_misses_total", "Images fetched and unpacked here.",
               MetricType::Counter), {}, static_cast<double>(images_->misses));
    Add(Family(out, "athanor_agent_image_cache_fetched_bytes_total", "Image tar bytes fetched from the coordinator.",
               MetricType::Counter), {}, static_cast<double>(images_->bytes_fetched));
    Add(Family(out, "athanor_agent_image_cache_bytes", "Unpacked bytes of the images cached here.",
               MetricType::Gauge), {}, static_cast<double>(images_->bytes_cached));
    Add(Family(out, "athanor_agent_image_cache_images", "Images cached here.", MetricType::Gauge), {},
        static_cast<double>(images_->images));
  }
  Add(Family(out, "athanor_agent_telemetry_dropped_total",
             "Telemetry messages dropped (malformed or over 4 KiB).", MetricType::Counter),
      {}, static_cast<double>(telemetry_dropped));
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  for (MetricFamily& f : out) {
    for (ClientMetric& m : f.metric) m.label.push_back({"node", node_});
  }
  absl::MutexLock lock(&mu_);
  families_ = std::move(out);
}

std::string AgentMetrics::Scrape() const {
  std::ostringstream out;
  absl::MutexLock lock(&mu_);
  prometheus::TextSerializer().Serialize(out, families_);
  return out.str();
}

}  // namespace athanor::agent
