// Placement: chooses the nodes for one job, all-or-nothing.
//
// Each of the job's `nodes` ranks groups gets a distinct node contributing
// exactly `gpus_per_node` GPUs, so the node count is fixed by the request and
// packing is about *which* nodes:
//   1. same "switch" label when some switch has enough eligible nodes, else the
//      same "rack", else any (groups compared by the GPUs they would leave idle,
//      then by label value);
//   2. best fit inside the group: nodes with the fewest free GPUs first (then
//      lowest node index), so whole nodes stay free for big gangs.
// Eligible: UP, statically fits (model, GPU memory, sizes) and has the GPUs,
// CPUs and RAM free, within an optional per-node cap (backfill slack).
//
// Threading: pure functions over the state passed in.
#pragma once

#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "coordinator/scheduler/membership.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sched {

// A per-node amount of resources (free, held or allowed).
struct Resources {
  int gpus = 0;
  int cpus = 0;
  int64_t memory_mb = 0;

  bool Covers(const Resources& need) const {
    return gpus >= need.gpus && cpus >= need.cpus && memory_mb >= need.memory_mb;
  }
  Resources& operator+=(const Resources& o) {
    gpus += o.gpus, cpus += o.cpus, memory_mb += o.memory_mb;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    gpus -= o.gpus, cpus -= o.cpus, memory_mb -= o.memory_mb;
    return *this;
  }
};

inline Resources PerNodeNeed(const JobRequest& job) {
  return Resources{job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node};
}
Resources FreeOf(const MemberNode& node);
Resources HoldOf(const NodeHold& hold);


// Caps on what a job may take on some nodes (absent nodes: no cap).
using NodeCaps = std::unordered_map<int, Resources>;

struct PlacementResult {
  std::vector<int> nodes;  // chosen node indices; empty when the job does not fit
  int eligible = 0;        // nodes that could host one share (>= nodes.size())
  bool ok() const { return !nodes.empty(); }
};

// On the live free state, using Membership's free-GPU index.
PlacementResult PlaceLive(const Membership& members, const JobRequest& job, const NodeCaps* caps);

// On a projected free state (`free[i]` for node i; only UP nodes count).
// `fits`, when given, is UpAndStaticallyFits for `job` per node, computed once
// by a caller that places the same job on several projections.
PlacementResult PlaceProjected(const Membership& members, const JobRequest& job,
                               const std::vector<Resources>& free,
                               const std::vector<char>* fits = nullptr);

// Picks job.nodes of `eligible` (pairs of free GPUs, node index) by topology
// and best fit; empty if there are too few.
std::vector<int> ChooseNodes(const Membership& members, const JobRequest& job,
                             std::vector<std::pair<int, int>> eligible);

// Whether node `index` is UP and its inventory could host one share of `job`.
bool UpAndStaticallyFits(const Membership& members, int index, const JobRequest& job);
// How many nodes UpAndStaticallyFits the job.
int CountUpAndStaticallyFit(const Membership& members, const JobRequest& job);

}  // namespace athanor::sched
