#include "coordinator/scheduler/reservation.h"

#include <algorithm>

namespace athanor::sched {

namespace {

Resources Floor0(Resources r) {
  r.gpus = std::max(r.gpus, 0);
  r.cpus = std::max(r.cpus, 0);
  r.memory_mb = std::max<int64_t>(r.memory_mb, 0);
  return r;
}

Resources HoldOn(const Membership& members, int node, const JobId& job) {
  const auto& holds = members.node(node).holds;
  auto it = holds.find(job);
  return it == holds.end() ? Resources{} : HoldOf(it->second);
}

}  // namespace

std::optional<Reservation> ComputeReservation(const Membership& members, const JobRecord& head,
                                              const std::vector<const JobRecord*>& holders,
                                              TimePoint now) {
  const JobRequest& job = head.req;
  const Resources need = PerNodeNeed(job);
  const int n = members.size();
  std::vector<Resources> proj(n);
  std::vector<char> fits_static(n, 0);
  int count = 0;
  for (int i = 0; i < n; ++i) {
    proj[i] = FreeOf(members.node(i));
    fits_static[i] = UpAndStaticallyFits(members, i, job);
    if (fits_static[i] && proj[i].Covers(need)) ++count;
  }
  std::vector<std::pair<TimePoint, const JobRecord*>> ends;
  for (const JobRecord* holder : holders) {
    if (auto end = holder->EndEstimate()) ends.emplace_back(std::max(*end, now), holder);
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->req.id < b.second->req.id;
  });

  Reservation reservation;
  reservation.job = job.id;
  reservation.priority = job.priority;
  size_t next = 0;
  TimePoint at = now;
  while (true) {
    if (count >= job.nodes) {
      PlacementResult placed = PlaceProjected(members, job, proj);
      if (placed.ok()) {
        reservation.finite = true;
        reservation.start = at;
        reservation.nodes = placed.nodes;
        break;
      }
    }
    if (next == ends.size()) break;
    at = ends[next].first;
    for (; next < ends.size() && ends[next].first == at; ++next) {
      const JobRecord* holder = ends[next].second;
      for (int node : holder->nodes) {
        bool was = fits_static[node] && proj[node].Covers(need);
        proj[node] += HoldOn(members, node, holder->req.id);
        if (!was && fits_static[node] && proj[node].Covers(need)) ++count;
      }
    }
  }
  if (!reservation.finite) {
    std::vector<Resources> capacity(n);
    for (int i = 0; i < n; ++i) {
      const NodeSpec& spec = members.node(i).spec;
      capacity[i] = Resources{spec.gpus, spec.cpus, spec.memory_mb};
    }
    PlacementResult placed = PlaceProjected(members, job, capacity);
    if (!placed.ok()) return std::nullopt;
    reservation.nodes = placed.nodes;
  }
  // `proj` now holds what is free at the start (or after every finite end).
  for (int node : reservation.nodes) {
    Resources slack = proj[node];
    slack -= need;
    reservation.slack[node] = Floor0(slack);
  }
  return reservation;
}

void ConsumeSlack(Reservation& reservation, int node, const Resources& used) {
  auto it = reservation.slack.find(node);
  if (it == reservation.slack.end()) return;
  it->second -= used;
  it->second = Floor0(it->second);
}

}  // namespace athanor::sched
