// ClusterAgents: the agents' side of the cluster state. A facet of
// ClusterState (ClusterState::agents()), like ClusterAdmin: what an agent
// tells the coordinator (its registration and heartbeats, with the ranks it
// runs or saw exit) and what it is told back (the ranks its node should run).
//
// Only reports of ranks placed on the reporting node in their job's current
// attempt count; others are logged and ignored (report_placement.h). Running
// ranks' progress feeds the hang detector (cluster_state_hangs.cc).
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/state_types.h"

namespace athanor::coord {

class ClusterState;

class ClusterAgents {
 public:
  explicit ClusterAgents(ClusterState& state) : state_(state) {}

  // An agent (re)registers, reporting every rank it runs or saw exit. Ranks
  // placed there that the agent no longer knows are lost.
  absl::Status Register(const NodeRecord& node, const std::vector<RankReport>& ranks);
  // False when the node must register first. A failed health check drains
  // the node with `health_message` as reason.
  bool Heartbeat(const std::string& node, uint64_t known_generation,
                 const std::vector<RankReport>& ranks, bool health_ok = true,
                 const std::string& health_message = "");

  // ---- reads, over a const state
  // The ranks `node` should run now. Empty for unknown nodes.
  static std::vector<DesiredRank> DesiredFor(const ClusterState& state, const std::string& node);

 private:
  // The reports of `reports` that `node` may make (report_placement.h).
  std::vector<RankReport> PlacedOn(const std::string& node, const std::vector<RankReport>& reports) const;

  ClusterState& state_;
};

}  // namespace athanor::coord
