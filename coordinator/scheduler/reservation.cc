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

std::optional<Reservation> ComputeReservation(const Membership& members, const JobRequest& head,
                                              const EndIndex& ends, const std::vector<char>& fits,
                                              TimePoint now) {
  const JobRequest& job = head;
  const Resources need = PerNodeNeed(job);
  const int n = members.size();
  std::vector<Resources> proj(n);
  int count = 0;
  for (int i = 0; i < n; ++i) {
    proj[i] = FreeOf(members.node(i));
    if (fits[i] && proj[i].Covers(need)) ++count;
  }

  Reservation reservation;
  reservation.job = job.id;
  reservation.priority = job.priority;
  auto next = ends.begin();
  // Ends already past count as now: they are one instant.
  auto end_of = [now](EndIndex::const_iterator it) { return std::max(it->first, now); };
  TimePoint at = now;
  while (true) {
    if (count >= job.nodes) {
      PlacementResult placed = PlaceProjected(members, job, proj, &fits);
      if (placed.ok()) {
        reservation.finite = true;
        reservation.start = at;
        reservation.nodes = placed.nodes;
        break;
      }
    }
    if (next == ends.end()) break;
    at = end_of(next);
    for (; next != ends.end() && end_of(next) == at; ++next) {
      const QueuedJob* holder = next->second;
      for (int node : holder->nodes) {
        bool was = fits[node] && proj[node].Covers(need);
        proj[node] += HoldOn(members, node, holder->req.id);
        if (!was && fits[node] && proj[node].Covers(need)) ++count;
      }
    }
  }
  if (!reservation.finite) {
    std::vector<Resources> capacity(n);
    for (int i = 0; i < n; ++i) {
      const NodeSpec& spec = members.node(i).spec;
      capacity[i] = Resources{spec.gpus, spec.cpus, spec.memory_mb};
    }
    PlacementResult placed = PlaceProjected(members, job, capacity, &fits);
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
