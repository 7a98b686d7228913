#include "coordinator/scheduler/placement.h"

#include <algorithm>
#include <map>
#include <string>

namespace athanor::sched {

Resources FreeOf(const MemberNode& node) {
  return Resources{node.free_gpus, node.free_cpus, node.free_memory_mb};
}

Resources HoldOf(const NodeHold& hold) {
  return Resources{static_cast<int>(hold.gpu_ids.size()), hold.cpus, hold.memory_mb};
}

bool UpAndStaticallyFits(const Membership& members, int index, const JobRequest& job) {
  const MemberNode& node = members.node(index);
  return !node.removed && node.state == MemberState::kUp && StaticallyFits(node.spec, job) &&
         !job.Avoids(node.spec.name);
}

int CountUpAndStaticallyFit(const Membership& members, const JobRequest& job) {
  int hosts = 0;
  for (int i = 0; i < members.size(); ++i) hosts += UpAndStaticallyFits(members, i, job);
  return hosts;
}

namespace {

// Fitting nodes of one bucket a single-node job with an image looks at for
// one that caches it: the preference costs a pass a bounded amount.
constexpr int kMaxCacheProbes = 32;

// Best group sharing one label value (group ids from Membership), or empty.
// `sorted` is ordered by (free GPUs, index), so each group's first n members
// are its best fit; groups compare by the GPUs those would leave idle, then by
// label value.
std::vector<int> ChooseInGroups(const Membership& members, bool by_switch, int n,
                                const std::vector<std::pair<int, int>>& sorted) {
  const auto& names = by_switch ? members.switch_groups() : members.rack_groups();
  std::vector<std::vector<int>> groups(names.size());
  std::vector<int64_t> score(names.size(), 0);
  for (const auto& [free, index] : sorted) {
    const MemberNode& node = members.node(index);
    int group = by_switch ? node.switch_group : node.rack_group;
    if (group < 0 || static_cast<int>(groups[group].size()) >= n) continue;
    groups[group].push_back(index);
    score[group] += free;
  }
  int best = -1;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (static_cast<int>(groups[g].size()) < n) continue;
    if (best < 0 || score[g] < score[best] || (score[g] == score[best] && names[g] < names[best])) {
      best = static_cast<int>(g);
    }
  }
  return best < 0 ? std::vector<int>{} : groups[best];
}

}  // namespace

std::vector<int> ChooseNodes(const Membership& members, const JobRequest& job,
                             std::vector<std::pair<int, int>> eligible) {
  const int n = job.nodes;
  if (static_cast<int>(eligible.size()) < n) return {};
  if (!std::is_sorted(eligible.begin(), eligible.end())) std::sort(eligible.begin(), eligible.end());
  if (n > 1) {
    for (bool by_switch : {true, false}) {
      std::vector<int> chosen = ChooseInGroups(members, by_switch, n, eligible);
      if (!chosen.empty()) return chosen;
    }
  }
  std::vector<int> chosen;
  for (int i = 0; i < n; ++i) chosen.push_back(eligible[i].second);
  return chosen;
}

PlacementResult PlaceLive(const Membership& members, const JobRequest& job, const NodeCaps* caps) {
  const Resources need = PerNodeNeed(job);
  std::vector<std::string> models;
  if (job.gpu_model.empty()) {
    models = members.Models();
  } else {
    models.push_back(job.gpu_model);
  }
  PlacementResult result;
  std::vector<std::pair<int, int>> eligible;
  for (int free = need.gpus; free <= members.max_gpus(); ++free) {
    int best_single = -1;
    bool best_cached = false;  // best_single's agent has the job's image cached
    for (const std::string& model : models) {
      const std::set<int>* bucket = members.Bucket(model, free);
      if (bucket == nullptr) continue;
      int probed = 0;
      for (int index : *bucket) {
        const MemberNode& node = members.node(index);
        // The bucket is of the right model; check the rest of the inventory.
        if (node.spec.gpu_memory_mb < job.min_gpu_memory_mb || node.spec.cpus < job.cpus_per_node ||
            node.spec.memory_mb < job.memory_mb_per_node || job.Avoids(node.spec.name)) {
          continue;
        }
        Resources avail = FreeOf(node);
        if (caps != nullptr) {
          auto cap = caps->find(index);
          if (cap != caps->end()) {
            avail.gpus = std::min(avail.gpus, cap->second.gpus);
            avail.cpus = std::min(avail.cpus, cap->second.cpus);
            avail.memory_mb = std::min(avail.memory_mb, cap->second.memory_mb);
          }
        }
        if (!avail.Covers(need)) continue;
        ++result.eligible;
        if (job.nodes == 1) {
          // Equally good fits: one that has the job's image cached wins, else
          // the lowest index. Buckets iterate by index, so the first match is
          // this model's best; with an image, a few more are looked at for one
          // that caches it.
          const bool cached = !job.image_digest.empty() && node.Caches(job.image_digest);
          if (best_single < 0 || (cached && !best_cached) || (cached == best_cached && index < best_single)) {
            best_single = index;
            best_cached = cached;
          }
          if (job.image_digest.empty() || cached || ++probed >= kMaxCacheProbes) break;
          continue;
        }
        eligible.emplace_back(free, index);
      }
    }
    if (job.nodes == 1 && best_single >= 0) {
      result.nodes.push_back(best_single);
      return result;
    }
  }
  result.nodes = ChooseNodes(members, job, std::move(eligible));
  return result;
}

PlacementResult PlaceProjected(const Membership& members, const JobRequest& job,
                               const std::vector<Resources>& free, const std::vector<char>* fits) {
  const Resources need = PerNodeNeed(job);
  std::vector<std::pair<int, int>> eligible;
  for (int i = 0; i < members.size(); ++i) {
    if (!free[i].Covers(need)) continue;
    if (fits != nullptr ? !(*fits)[i] : !UpAndStaticallyFits(members, i, job)) continue;
    eligible.emplace_back(free[i].gpus, i);
  }
  PlacementResult result;
  result.eligible = static_cast<int>(eligible.size());
  result.nodes = ChooseNodes(members, job, std::move(eligible));
  return result;
}

}  // namespace athanor::sched
