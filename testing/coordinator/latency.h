// Latency samples gathered from many threads, and their percentiles.
// LatencyRecorder is thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor::bench {

// The p-th percentile (0..100, nearest rank) of `v`; 0 when empty. Sorts `v`.
inline double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

class LatencyRecorder {
 public:
  void Add(double ms) {
    absl::MutexLock lock(&mu_);
    samples_.push_back(ms);
  }
  // Moves the samples out and starts afresh.
  std::vector<double> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<double> out;
    out.swap(samples_);
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<double> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::bench
