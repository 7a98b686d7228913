// AgentMetrics: the node agent's Prometheus metrics (docs/observability.md):
// ranks running, rank exits by cause, per-device GPU utilisation and memory
// (only where nvidia-smi answers: absent, not zero, elsewhere), CPU time and
// resident memory per job (from /proc, over each rank's process group) and
// the newest training figures per job from the telemetry socket, and the
// checkpoint uploads of the node (ranks' own and its checkpoint service's).
//
// Update() runs on the heartbeat loop and builds the whole exposition's
// families; Scrape() (HTTP threads) only serialises the last one built, so a
// scrape never touches the supervisor or /proc. Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/agent/checkpoint_counters.h"
#include "worker/agent/image_cache.h"
#include "worker/agent/rank_supervisor.h"
#include "worker/agent/telemetry_hub.h"

namespace athanor::agent {

struct GpuReadings {
  std::map<int, double> utilization;  // percent, by index
  std::map<int, double> memory_used_mb;
};

class AgentMetrics {
 public:
  explicit AgentMetrics(std::string node) : node_(std::move(node)) {}

  // `gpus` null: not measured on this node.
  void Update(const std::vector<RankStatusReport>& reports, const GpuReadings* gpus,
              const std::map<std::pair<std::string, int32_t>, StepSample>& telemetry,
              uint64_t telemetry_dropped);
  std::string Scrape() const;
  // The checkpoint upload totals the next Update exports: those ranks
  // uploaded themselves, and the node service's (nullopt: no service here).
  // Heartbeat loop only, like Update.
  void SetCheckpointUploads(const UploadFigures& by_ranks, std::optional<UploadFigures> by_service) {
    ckpt_by_ranks_ = by_ranks;
    ckpt_by_service_ = by_service;
  }

  // The image cache's figures the next Update exports (heartbeat loop only).
  void SetImageCache(const ImageCacheStats& stats) { images_ = stats; }

  // "success", "error", "signal", "oom" or "failed_to_start".
  static const char* ExitCause(const RankStatusReport& r);

 private:
  const std::string node_;
  // Heartbeat loop only.
  std::set<RankKey> counted_;
  std::map<std::string, int64_t> exits_;
  UploadFigures ckpt_by_ranks_;
  std::optional<UploadFigures> ckpt_by_service_;
  std::optional<ImageCacheStats> images_;
  mutable absl::Mutex mu_;
  std::vector<prometheus::MetricFamily> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::agent
