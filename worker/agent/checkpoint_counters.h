// The node's checkpoint upload figures for the agent's /metrics, from two
// sources:
//  - ranks that upload their own checkpoints tell each finished one over the
//    telemetry socket ("ckpt_step", "ckpt_bytes", "ckpt_upload_ms"; the
//    TelemetryHub adds them up once per rank and step);
//  - the node's checkpoint service writes the totals of its run to a stats
//    file after each upload (checkpoint/service/checkpoint_service.h,
//    --stats-file). A restarted service starts again from zero, so
//    ServiceUploadCounter adds each run's growth: the counters only go up.
//
// Not thread-safe: the agent's heartbeat loop owns the counter.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::agent {

struct UploadFigures {
  uint64_t uploads = 0;   // shards made durable
  uint64_t failures = 0;  // shards whose upload failed (the service only)
  double bytes = 0;
  double seconds = 0;
};

// One read of the service's stats file: its run (pid) and that run's totals.
struct ServiceStats {
  int64_t pid = 0;
  UploadFigures totals;
};

// Parses the stats file at `path`. NotFound before the service's first
// upload; InvalidArgument naming the field for a malformed file.
absl::StatusOr<ServiceStats> ReadServiceStats(const std::string& path);

class ServiceUploadCounter {
 public:
  // Folds in one reading; a reading from a new run (another pid) starts that
  // run's growth from zero.
  void Observe(const ServiceStats& stats);
  // Everything uploaded since the agent started, across service restarts.
  UploadFigures total() const;

 private:
  int64_t pid_ = 0;
  UploadFigures finished_runs_;  // the runs before the current one
  UploadFigures current_;        // the current run's last reading
};

}  // namespace athanor::agent
