#include "coordinator/observability/telemetry_store.h"

#include <algorithm>

namespace athanor::coord {

bool TelemetryStore::Add(const std::string& job, const std::vector<TelemetryFigures>& samples,
                         int64_t now_ms) {
  if (samples.empty()) return false;
  absl::MutexLock lock(&mu_);
  Series& s = jobs_[job];
  for (const TelemetryFigures& f : samples) {
    const TelemetryFigures* last = s.points.empty() ? nullptr : &s.points.back();
    const bool new_attempt = last != nullptr && f.attempt != last->attempt;
    if (last == nullptr || new_attempt || f.step >= last->step + s.stride || f.step < last->step) {
      s.points.push_back(f);
    }
    if (s.points.size() >= kMaxPoints) {
      // Keep every other point (the newest always stays) and widen the spacing.
      std::vector<TelemetryFigures> kept;
      kept.reserve(kMaxPoints / 2 + 1);
      for (size_t i = s.points.size() % 2 == 0 ? 1 : 0; i < s.points.size(); i += 2) {
        kept.push_back(s.points[i]);
      }
      s.points = std::move(kept);
      s.stride *= 2;
    }
    s.latest = f;
  }
  s.updated_ms = now_ms;
  bool persist = s.latest.attempt != s.persisted_attempt || now_ms - s.persisted_ms >= kPersistEveryMs;
  if (persist) {
    s.persisted_ms = now_ms;
    s.persisted_attempt = s.latest.attempt;
  }
  if (jobs_.size() > kMaxJobs) EvictLocked();
  return persist;
}

void TelemetryStore::EvictLocked() {
  auto oldest = std::min_element(jobs_.begin(), jobs_.end(), [](const auto& a, const auto& b) {
    return a.second.updated_ms < b.second.updated_ms;
  });
  if (oldest != jobs_.end()) jobs_.erase(oldest);
}

void TelemetryStore::SetGpus(const std::string& node, std::map<int32_t, GpuReading> gpus) {
  absl::MutexLock lock(&mu_);
  if (gpus.empty()) {
    gpus_.erase(node);
  } else {
    gpus_[node] = std::move(gpus);
  }
}

std::vector<TelemetryFigures> TelemetryStore::History(const std::string& job) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  std::vector<TelemetryFigures> out = it->second.points;
  // The newest sample is always shown, even between kept points.
  if (it->second.latest.step >= 0 &&
      (out.empty() || out.back().step != it->second.latest.step ||
       out.back().attempt != it->second.latest.attempt)) {
    out.push_back(it->second.latest);
  }
  return out;
}

TelemetryFigures TelemetryStore::Latest(const std::string& job, double* steps_per_s) const {
  absl::MutexLock lock(&mu_);
  *steps_per_s = 0;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return TelemetryFigures{};
  const Series& s = it->second;
  const TelemetryFigures& newest = s.latest;
  // The oldest point of the same attempt within the last 30 s.
  for (const TelemetryFigures& p : s.points) {
    if (p.attempt != newest.attempt || newest.unix_ms - p.unix_ms > 30000) continue;
    if (newest.unix_ms > p.unix_ms && newest.step > p.step) {
      *steps_per_s = static_cast<double>(newest.step - p.step) * 1000.0 /
                     static_cast<double>(newest.unix_ms - p.unix_ms);
    }
    break;
  }
  return newest;
}

std::map<int32_t, GpuReading> TelemetryStore::Gpus(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = gpus_.find(node);
  return it == gpus_.end() ? std::map<int32_t, GpuReading>{} : it->second;
}

}  // namespace athanor::coord
