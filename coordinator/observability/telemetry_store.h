// TelemetryStore: the coordinator's training telemetry, as agents forward it
// in heartbeats (rank 0's figures per job) and GPU samples per node.
//
// History per job is bounded and downsampled: at most kMaxPoints samples;
// when full, every other one is dropped and the spacing (in steps) between
// kept samples doubles, so a job of any length keeps an even picture of its
// whole run in flat memory. At most kMaxJobs jobs are kept (the least
// recently updated goes first).
//
// Thread-safe (its own mutex, never held while calling out). It does not
// take the coordinator's state lock; the view builder reads it under that
// lock (lock order: state lock, then this one).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

struct GpuReading {
  double utilization = 0;  // percent
  double memory_used_mb = 0;
  int64_t unix_ms = 0;
};

class TelemetryStore {
 public:
  static constexpr size_t kMaxPoints = 512;
  static constexpr size_t kMaxJobs = 4096;
  // Newest figures are persisted with the job at most this often.
  static constexpr int64_t kPersistEveryMs = 30000;

  // Adds rank 0's samples of `job` (oldest first). Returns true when the
  // newest should now be persisted with the job (first sample of an
  // attempt, or kPersistEveryMs since the last time).
  bool Add(const std::string& job, const std::vector<TelemetryFigures>& samples, int64_t now_ms);
  void SetGpus(const std::string& node, std::map<int32_t, GpuReading> gpus);

  std::vector<TelemetryFigures> History(const std::string& job) const;
  // The newest sample (step < 0 when none) and steps per second over the
  // last ~30 s of history (0 when unknown).
  TelemetryFigures Latest(const std::string& job, double* steps_per_s) const;
  std::map<int32_t, GpuReading> Gpus(const std::string& node) const;

 private:
  struct Series {
    std::vector<TelemetryFigures> points;
    int64_t stride = 1;
    TelemetryFigures latest;
    int64_t persisted_ms = 0;
    int32_t persisted_attempt = -1;
    int64_t updated_ms = 0;
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Series> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int32_t, GpuReading>> gpus_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::coord
