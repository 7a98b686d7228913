#include "coordinator/hang_detector.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace athanor::coord {
namespace {

constexpr size_t kStepSamples = 64;      // step times kept per attempt for the median
constexpr size_t kWindowSamples = 1024;  // compute samples kept per rank per window

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool Finite(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace

std::string HangDetector::Key(const std::string& job, int32_t attempt) {
  return absl::StrCat(job, "#", attempt);
}

void HangDetector::Observe(const std::string& node, const RankReport& report) {
  const RankProgressView& p = report.progress;
  if (!p.seen && !p.stopped) return;
  AttemptTrack& a = attempts_[report.job_id];
  const TimePoint now = clock_->Now();
  if (a.attempt != report.attempt) {
    if (report.attempt < a.attempt) return;  // a late report of an older attempt
    a = AttemptTrack{};
    a.attempt = report.attempt;
    a.window_start = now;
  }
  auto [it, fresh] = a.ranks.try_emplace(report.rank);
  RankTrack& r = it->second;
  r.node = node;
  if (fresh) {
    r.last = p;
    r.last_change = now;
    return;
  }
  if (!p.seen) {  // stopped, page unreadable: no progress
    r.last.stopped = p.stopped;
    return;
  }
  const bool moved = p.step != r.last.step || p.collective_seq != r.last.collective_seq;
  if (moved) r.last_change = now;
  if (p.step != r.last.step && p.step > 0) {
    if (Finite(p.step_ms)) {
      a.step_ms.push_back(p.step_ms);
      if (a.step_ms.size() > kStepSamples) a.step_ms.erase(a.step_ms.begin());
    }
    if (Finite(p.step_compute_ms) && r.window_compute_ms.size() < kWindowSamples) {
      r.window_compute_ms.push_back(p.step_compute_ms);
    }
  }
  r.last = p;
}

Duration HangDetector::Timeout(const JobRecord& job) const {
  if (job.spec.hang_timeout_s > 0) return Seconds(static_cast<double>(job.spec.hang_timeout_s));
  Duration t = options_.min_timeout;
  auto it = attempts_.find(job.id);
  if (it != attempts_.end() && it->second.attempt == job.attempt && !it->second.step_ms.empty()) {
    Duration by_steps = Seconds(options_.step_multiple * Median(it->second.step_ms) / 1000.0);
    t = std::max(t, by_steps);
  }
  return t;
}

HangVerdict HangDetector::Judge(const JobRecord& job, const AttemptTrack& a, TimePoint now) const {
  HangVerdict v;
  v.job_id = job.id;
  v.attempt = a.attempt;
  TimePoint newest{};
  for (const auto& [rank, r] : a.ranks) newest = std::max(newest, r.last_change);
  v.stalled_s = ToSeconds(now - newest);

  // The collective the blocked peers wait in: the highest issue number any
  // rank waits on.
  uint64_t peer_seq = 0;
  std::string peer_op;
  for (const auto& [rank, r] : a.ranks) {
    if (r.last.waiting_seq > peer_seq) {
      peer_seq = r.last.waiting_seq;
      peer_op = r.last.waiting_op;
    }
  }
  const RankTrack* suspect = nullptr;
  std::string why;
  for (const auto& [rank, r] : a.ranks) {  // 1: a stopped process
    if (r.last.stopped) {
      v.suspect = rank;
      suspect = &r;
      why = "a process of it is stopped";
      break;
    }
  }
  if (suspect == nullptr && peer_seq > 0) {  // 2: not in the collective peers wait in
    for (const auto& [rank, r] : a.ranks) {
      const bool absent = r.last.waiting_seq != peer_seq || r.last.collective_seq < peer_seq;
      if (!absent) continue;
      if (suspect == nullptr || r.last.collective_seq < suspect->last.collective_seq) {
        v.suspect = rank;
        suspect = &r;
      }
    }
  }
  if (suspect == nullptr) {  // 3: whose progress stopped first
    for (const auto& [rank, r] : a.ranks) {
      if (suspect == nullptr || r.last_change < suspect->last_change) {
        v.suspect = rank;
        suspect = &r;
      }
    }
  }
  std::string peers;
  if (peer_seq > 0) {
    peers = absl::StrCat("peers waiting in ", peer_op.empty() ? "a collective" : peer_op, " #",
                         peer_seq);
  } else {
    peers = absl::StrCat("no rank in a collective; step ", suspect ? suspect->last.step : -1);
  }
  if (!why.empty()) peers = absl::StrCat(why, "; ", peers);
  v.node = suspect != nullptr ? suspect->node : "";
  const double quiet = suspect != nullptr ? ToSeconds(now - suspect->last_change) : v.stalled_s;
  v.reason = absl::StrFormat("hang: rank %d on %s made no progress for %.0f s (%s)", v.suspect,
                             v.node, quiet, peers);
  return v;
}

std::vector<HangVerdict> HangDetector::Check(const std::vector<const JobRecord*>& running) {
  const TimePoint now = clock_->Now();
  std::vector<HangVerdict> out;
  std::set<std::string> live;
  for (const JobRecord* job : running) {
    live.insert(job->id);
    auto it = attempts_.find(job->id);
    if (it == attempts_.end()) continue;
    AttemptTrack& a = it->second;
    if (a.attempt != job->attempt) {
      attempts_.erase(it);
      continue;
    }
    if (now - a.window_start >= options_.straggler_window) CloseWindow(&a);
    if (a.ranks.empty()) continue;
    TimePoint newest{};
    for (const auto& [rank, r] : a.ranks) newest = std::max(newest, r.last_change);
    if (now - newest < Timeout(*job)) continue;
    out.push_back(Judge(*job, a, now));
    attempts_.erase(job->id);  // judged once; the attempt is being stopped
  }
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    it = live.count(it->first) ? std::next(it) : attempts_.erase(it);
  }
  return out;
}

void HangDetector::CloseWindow(AttemptTrack* a) {
  a->window_start = clock_->Now();
  const size_t k = static_cast<size_t>(options_.straggler_windows);
  std::map<int32_t, std::vector<double>> pooled;  // ranks with samples in each of the last k windows
  for (auto& [rank, r] : a->ranks) {
    r.recent.push_back(std::move(r.window_compute_ms));
    r.window_compute_ms.clear();
    while (r.recent.size() > k) r.recent.pop_front();
    if (r.recent.size() < k) continue;
    std::vector<double> all;
    bool every_window = true;
    for (const std::vector<double>& w : r.recent) {
      every_window = every_window && !w.empty();
      all.insert(all.end(), w.begin(), w.end());
    }
    if (every_window) pooled[rank] = std::move(all);
  }
  if (pooled.size() < 2) return;  // no gang to compare with over this span
  for (auto& [rank, r] : a->ranks) {
    auto self = pooled.find(rank);
    if (self == pooled.end()) continue;
    std::vector<double> others;
    for (const auto& [other, samples] : pooled) {
      if (other != rank) others.insert(others.end(), samples.begin(), samples.end());
    }
    const double base = Median(others);
    r.ratio = base > 0 ? Median(self->second) / base : 0;
    r.flagged = r.ratio > options_.straggler_ratio;
  }
}

std::vector<RankFlag> HangDetector::Stragglers(const std::string& job_id, int32_t attempt) const {
  std::vector<RankFlag> out;
  auto it = attempts_.find(job_id);
  if (it == attempts_.end() || it->second.attempt != attempt) return out;
  for (const auto& [rank, r] : it->second.ranks) {
    if (!r.flagged) continue;
    out.push_back({rank, r.node,
                   absl::StrFormat("straggler: compute %.2fx the gang median over %d windows",
                                   r.ratio, options_.straggler_windows)});
  }
  return out;
}

bool SuspectLedger::Strike(const std::string& node) {
  if (options_->drain_after <= 0 || node.empty()) return false;
  const TimePoint now = clock_->Now();
  std::vector<TimePoint>& s = strikes_[node];
  s.push_back(now);
  s.erase(std::remove_if(s.begin(), s.end(),
                         [&](TimePoint t) { return now - t > options_->drain_window; }),
          s.end());
  if (static_cast<int32_t>(s.size()) < options_->drain_after) return false;
  s.clear();
  return true;
}

}  // namespace athanor::coord
