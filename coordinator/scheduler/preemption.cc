#include "coordinator/scheduler/preemption.h"

#include <algorithm>
#include <tuple>

namespace athanor::sched {

namespace {

// Counts nodes able to host one share of the job while victims are added and
// removed, touching only their nodes.
class FeasibilityTracker {
 public:
  FeasibilityTracker(const Membership& members, const JobRequest& job,
                     const std::vector<Resources>& base)
      : job_(job), need_(PerNodeNeed(job)), free_(base) {
    fits_.resize(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      fits_[i] = UpAndStaticallyFits(members, static_cast<int>(i), job);
      if (Eligible(i)) ++count_;
    }
  }
  void Add(const PreemptionCandidate& c) { Apply(c, +1); }
  void Remove(const PreemptionCandidate& c) { Apply(c, -1); }
  bool Feasible() const { return count_ >= job_.nodes; }

 private:
  bool Eligible(size_t i) const { return fits_[i] && free_[i].Covers(need_); }
  void Apply(const PreemptionCandidate& c, int sign) {
    for (const auto& [node, hold] : c.holds) {
      bool was = Eligible(node);
      if (sign > 0) {
        free_[node] += hold;
      } else {
        free_[node] -= hold;
      }
      count_ += static_cast<int>(Eligible(node)) - static_cast<int>(was);
    }
  }

  const JobRequest& job_;
  const Resources need_;
  std::vector<Resources> free_;
  std::vector<char> fits_;
  int count_ = 0;
};

struct Search {
  const std::vector<PreemptionCandidate>& c;
  FeasibilityTracker& tracker;
  std::vector<char> chosen;
  std::optional<std::tuple<int64_t, int>> best_cost;
  std::vector<char> best;

  void Run(size_t i, int64_t lost, int gpus) {
    if (best_cost && std::make_tuple(lost, gpus) >= *best_cost) return;
    if (tracker.Feasible()) {
      best_cost = std::make_tuple(lost, gpus);
      best = chosen;
      return;
    }
    if (i == c.size()) return;
    chosen[i] = 1;
    tracker.Add(c[i]);
    Run(i + 1, lost + c[i].lost_gpu_us, gpus + c[i].gpus);
    tracker.Remove(c[i]);
    chosen[i] = 0;
    Run(i + 1, lost, gpus);
  }
};

PreemptionPlan MakePlan(const std::vector<PreemptionCandidate>& c, const std::vector<char>& pick) {
  PreemptionPlan plan;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!pick[i]) continue;
    plan.victims.push_back(c[i].job);
    plan.lost_gpu_us += c[i].lost_gpu_us;
    plan.gpus_freed += c[i].gpus;
  }
  std::sort(plan.victims.begin(), plan.victims.end());
  return plan;
}

}  // namespace

std::optional<PreemptionPlan> PlanPreemption(const Membership& members, const JobRequest& job,
                                             const std::vector<Resources>& base,
                                             std::vector<PreemptionCandidate> candidates,
                                             int exact_limit) {
  // Only victims holding something on a node the job could use matter.
  std::erase_if(candidates, [&](const PreemptionCandidate& c) {
    return std::none_of(c.holds.begin(), c.holds.end(), [&](const auto& hold) {
      return UpAndStaticallyFits(members, hold.first, job);
    });
  });
  FeasibilityTracker tracker(members, job, base);
  for (const auto& c : candidates) tracker.Add(c);
  if (!tracker.Feasible()) return std::nullopt;
  for (const auto& c : candidates) tracker.Remove(c);

  if (static_cast<int>(candidates.size()) <= exact_limit) {
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return std::tie(a.lost_gpu_us, a.gpus, a.job) < std::tie(b.lost_gpu_us, b.gpus, b.job);
    });
    Search search{candidates, tracker, std::vector<char>(candidates.size(), 0), std::nullopt, {}};
    search.Run(0, 0, 0);
    return MakePlan(candidates, search.best);
  }

  // Greedy: cheapest lost work per GPU first, then drop what is not needed.
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    // a.lost/a.gpus < b.lost/b.gpus, in integers.
    __int128 l = static_cast<__int128>(a.lost_gpu_us) * b.gpus;
    __int128 r = static_cast<__int128>(b.lost_gpu_us) * a.gpus;
    return l != r ? l < r : a.job < b.job;
  });
  std::vector<char> pick(candidates.size(), 0);
  for (size_t i = 0; i < candidates.size() && !tracker.Feasible(); ++i) {
    pick[i] = 1;
    tracker.Add(candidates[i]);
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (pick[i]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (candidates[a].lost_gpu_us != candidates[b].lost_gpu_us) {
      return candidates[a].lost_gpu_us > candidates[b].lost_gpu_us;
    }
    return candidates[a].job < candidates[b].job;
  });
  for (size_t i : order) {
    tracker.Remove(candidates[i]);
    if (tracker.Feasible()) {
      pick[i] = 0;
    } else {
      tracker.Add(candidates[i]);
    }
  }
  return MakePlan(candidates, pick);
}

}  // namespace athanor::sched
