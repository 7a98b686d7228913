// ClusterAdmin: an admin's commands on the cluster state: draining and
// undraining a node, setting a tenant's quota (preempting a job by hand is
// JobLifecycle::Preempt). A facet of ClusterState (ClusterState::admin()),
// split off so that neither grows past ~20 public methods; it works on the
// state's parts and marks what changed in its ChangeLog like every other
// operation.
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/model/state_types.h"

namespace athanor::coord {

class ClusterState;

class ClusterAdmin {
 public:
  explicit ClusterAdmin(ClusterState& state) : state_(state) {}

  // DRAINING: no new work, running attempts preempted with `grace` (0: each
  // job's own) and requeued; DRAINED once empty. NotFound for an unknown node.
  absl::StatusOr<NodeView> DrainNode(const std::string& name, Duration grace, const std::string& reason);
  absl::StatusOr<NodeView> UndrainNode(const std::string& name);
  // `gpus` < 0: removes the tenant's quota.
  absl::Status SetQuota(const std::string& tenant, int32_t gpus);

 private:
  ClusterState& state_;
};

}  // namespace athanor::coord
