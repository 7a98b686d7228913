#include "coordinator/health/hang_detector.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/progress_page.h"

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
  if (job.spec.hang_timeout_s > 0) {
    // Submissions below the floor are refused; a record from before the
    // floor was raised is held to it too.
    return std::max<Duration>(Seconds(static_cast<double>(job.spec.hang_timeout_s)),
                              options_.timeout_floor);
  }
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

  // The collective that cannot complete: the lowest issue number a rank is
  // blocked in (every collective below it has finished on the ranks waiting
  // there, so all ranks joined those).
  uint64_t low = 0;
  std::string low_op;
  for (const auto& [rank, r] : a.ranks) {
    if (r.last.waiting_seq > 0 && (low == 0 || r.last.waiting_seq < low)) {
      low = r.last.waiting_seq;
      low_op = r.last.waiting_op;
    }
  }
  const std::string low_name = absl::StrCat(low_op.empty() ? "collective" : low_op, " #", low);
  // Outside collectives, a rank's training thread may wait for its
  // checkpoint hand-off, whose commit needs every rank's vote.
  const std::string save_op = ProgressOpName(ProgressOp::kCheckpointSave);
  bool peer_saving = false;
  for (const auto& [rank, r] : a.ranks) {
    peer_saving |= !r.last.stopped && r.last.waiting_seq == 0 && r.last.waiting_op == save_op;
  }
  const RankTrack* suspect = nullptr;
  std::string why;
  for (const auto& [rank, r] : a.ranks) {  // 1: a stopped process
    if (r.last.stopped) {
      v.cause = HangCause::kStoppedProcess;
      v.suspect = rank;
      suspect = &r;
      why = low > 0       ? absl::StrCat("a process of it is stopped; peers waiting in ", low_name)
            : peer_saving ? absl::StrCat("a process of it is stopped; peers waiting in ", save_op)
                          : "a process of it is stopped";
      break;
    }
  }
  if (suspect == nullptr && low > 0) {  // 2: not in the collective that cannot complete
    // Ranks in it, ranks that have not entered it (issued fewer), and ranks
    // past it (issued it, not in it). One that went past without the others
    // (skipped it) is the suspect, unless most ranks are past it: then they
    // finished it, which needs every rank's part, and the ones still in it
    // are stuck there.
    std::vector<const RankTrack*> in, behind, past;
    std::vector<int32_t> in_rank, behind_rank, past_rank;
    for (const auto& [rank, r] : a.ranks) {
      if (r.last.waiting_seq == low) {
        in.push_back(&r);
        in_rank.push_back(rank);
      } else if (r.last.collective_seq < low) {
        behind.push_back(&r);
        behind_rank.push_back(rank);
      } else {
        past.push_back(&r);
        past_rank.push_back(rank);
      }
    }
    auto pick = [&](const std::vector<const RankTrack*>& set, const std::vector<int32_t>& ranks,
                    bool lowest_seq) {
      size_t best = 0;
      for (size_t i = 1; i < set.size(); ++i) {
        if (lowest_seq && set[i]->last.collective_seq < set[best]->last.collective_seq) best = i;
      }
      suspect = set[best];
      v.suspect = ranks[best];
    };
    auto waits = [](const RankTrack& r) {
      return r.last.waiting_seq > 0
                 ? absl::StrCat("it waits in ",
                                r.last.waiting_op.empty() ? "collective" : r.last.waiting_op, " #",
                                r.last.waiting_seq)
                 : absl::StrCat("it is in no collective, at step ", r.last.step);
    };
    if (!behind.empty()) {
      pick(behind, behind_rank, /*lowest_seq=*/true);
      why = absl::StrCat("it has not entered ", low_name, " that its peers wait in; ",
                         waits(*suspect));
    } else if (!past.empty() && past.size() <= in.size()) {
      pick(past, past_rank, /*lowest_seq=*/true);
      why = absl::StrCat("it skipped ", low_name, " that its peers wait in; ", waits(*suspect));
    } else if (!past.empty()) {
      pick(in, in_rank, /*lowest_seq=*/false);
      why = absl::StrCat("it is still in ", low_name, ", which its peers finished");
    }
  }
  if (suspect == nullptr) {  // 3: whose progress stopped first
    for (const auto& [rank, r] : a.ranks) {
      if (suspect == nullptr || r.last_change < suspect->last_change) {
        v.suspect = rank;
        suspect = &r;
      }
    }
    why = low > 0 ? absl::StrCat("every rank waits in ", low_name)
                  : absl::StrCat("no rank in a collective; step ", suspect->last.step);
    if (low == 0 && !peer_saving) v.cause = HangCause::kIdle;
  }
  v.node = suspect != nullptr ? suspect->node : "";
  const double quiet = suspect != nullptr ? ToSeconds(now - suspect->last_change) : v.stalled_s;
  v.reason = absl::StrFormat("hang: rank %d on %s made no progress for %.0f s (%s)", v.suspect,
                             v.node, quiet, why);
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
    if (now - a.window_start >= std::max(options_.straggler_window, min_window_)) {
      CloseWindow(job->id, &a);
    }
    if (a.ranks.empty()) continue;
    // The timeout runs from the newest progress of any rank, or, while a
    // rank's process is stopped, from that rank's own last progress: its
    // peers may still finish what they were doing (a checkpoint save) before
    // they block on it, and that is not the gang moving on.
    TimePoint newest{}, stopped_newest{};
    bool stopped = false;
    for (const auto& [rank, r] : a.ranks) {
      newest = std::max(newest, r.last_change);
      if (r.last.stopped) {
        stopped_newest = stopped ? std::max(stopped_newest, r.last_change) : r.last_change;
        stopped = true;
      }
    }
    if (now - (stopped ? stopped_newest : newest) < Timeout(*job)) continue;
    out.push_back(Judge(*job, a, now));
    attempts_.erase(job->id);  // judged once; the attempt is being stopped
  }
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    it = live.count(it->first) ? std::next(it) : attempts_.erase(it);
  }
  return out;
}

void HangDetector::CloseWindow(const std::string& job_id, AttemptTrack* a) {
  a->window_start = clock_->Now();
  const size_t k = static_cast<size_t>(options_.straggler_windows);
  // This window alone: each rank's median against the others' samples.
  std::map<int32_t, std::vector<double>> window;
  for (auto& [rank, r] : a->ranks) {
    if (!r.window_compute_ms.empty()) window[rank] = r.window_compute_ms;
  }
  for (auto& [rank, r] : a->ranks) {
    bool slow = false;
    auto self = window.find(rank);
    if (self != window.end() && window.size() >= 2) {
      std::vector<double> others;
      for (const auto& [other, samples] : window) {
        if (other != rank) others.insert(others.end(), samples.begin(), samples.end());
      }
      const double base = Median(others);
      slow = base > 0 && Median(self->second) > options_.straggler_ratio * base;
    }
    r.slow_windows.push_back(slow);
    while (r.slow_windows.size() > k) r.slow_windows.pop_front();
  }
  // The span of the last k windows, pooled.
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
  // With fewer than two ranks over the span there is no gang to compare with.
  if (pooled.size() >= 2) {
    for (auto& [rank, r] : a->ranks) {
      auto self = pooled.find(rank);
      if (self == pooled.end()) continue;
      std::vector<double> others;
      for (const auto& [other, samples] : pooled) {
        if (other != rank) others.insert(others.end(), samples.begin(), samples.end());
      }
      const double base = Median(others);
      r.ratio = base > 0 ? Median(self->second) / base : 0;
      // Flagged once slow in each of the last k windows (one slow burst of a
      // noisy machine is not enough) and over their span; it stays flagged
      // while the span stays slow.
      const bool every_window_slow =
          r.slow_windows.size() == k &&
          std::all_of(r.slow_windows.begin(), r.slow_windows.end(), [](bool b) { return b; });
      r.flagged = r.ratio > options_.straggler_ratio && (every_window_slow || r.flagged);
    }
  }
  if (ATHANOR_LOG_LEVEL_DEBUG >= MinLogLevel()) {
    std::string ranks;
    for (const auto& [rank, r] : a->ranks) {
      auto self = window.find(rank);
      absl::StrAppend(&ranks, " rank ", rank, ": ",
                      self == window.end() ? std::string("no samples")
                                           : absl::StrFormat("%.2f ms (%d steps)", Median(self->second),
                                                             self->second.size()),
                      r.slow_windows.empty() || !r.slow_windows.back() ? "" : " slow",
                      absl::StrFormat(", span %.2fx", r.ratio), r.flagged ? " FLAGGED" : "", ";");
    }
    ATHANOR_LOG(DEBUG) << "straggler window of job " << job_id << " attempt " << a->attempt
                       << ": compute median per step" << ranks;
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
                                   r.ratio, options_.straggler_windows),
                   r.ratio});
  }
  return out;
}

bool SuspectLedger::Strike(const std::string& node, const std::string& tenant) {
  if (options_->drain_after <= 0 || node.empty()) return false;
  const TimePoint now = clock_->Now();
  std::map<std::string, TimePoint>& s = strikes_[node];
  s[tenant] = now;
  for (auto it = s.begin(); it != s.end();) {
    it = now - it->second > options_->drain_window ? s.erase(it) : std::next(it);
  }
  // One tenant is never enough, whatever drain_after says.
  if (static_cast<int32_t>(s.size()) < std::max(options_->drain_after, 2)) return false;
  strikes_.erase(node);
  return true;
}

}  // namespace athanor::coord
