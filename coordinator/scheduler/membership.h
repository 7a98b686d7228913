// Membership: the node inventory, node states, heartbeats and which job holds
// which GPU, CPU and RAM on each node.
//
// Nodes get a dense index at AddNode (never reused; removed nodes leave a
// tombstone) so the rest of the core works on ints. UP nodes are indexed by
// GPU model and number of free GPUs, so best-fit placement visits the nodes
// with the fewest free GPUs first without scanning the cluster.
//
// Threading: none; confined to the owning Scheduler's caller.
// Errors: NotFound for unknown nodes, AlreadyExists, FailedPrecondition for
// operations that would lose track of held resources.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sched {

// What one job holds on one node.
struct NodeHold {
  std::vector<int> gpu_ids;
  int cpus = 0;
  int64_t memory_mb = 0;
};

struct MemberNode {
  NodeSpec spec;
  MemberState state = MemberState::kUp;
  bool removed = false;
  TimePoint last_heartbeat{};
  int free_gpus = 0;
  int free_cpus = 0;
  int64_t free_memory_mb = 0;
  std::vector<bool> gpu_used;
  std::map<JobId, NodeHold> holds;  // ordered for deterministic output
  // Operator state kept with the node: `drain` (by an admin or a failed
  // health check) outlives DOWN and re-registration; `reason` says why the
  // node is DRAINING, DRAINED, DOWN or UNKNOWN.
  bool drain = false;
  std::string reason;
  int switch_group = -1;  // interned "switch" label value; -1 if absent
  int rack_group = -1;    // interned "rack" label value; -1 if absent
  // Digests in the node's agent's image cache, as its last heartbeat said
  // (a placement tie-break; memory only).
  std::vector<std::string> cached_images;
  bool Caches(const std::string& digest) const {
    return std::find(cached_images.begin(), cached_images.end(), digest) != cached_images.end();
  }
};

class Membership {
 public:
  // Registers a node (state UP). A node that exists and holds nothing has its
  // inventory replaced (agent re-registration); one holding resources must
  // keep its GPU count (FailedPrecondition otherwise).
  absl::Status AddNode(const NodeSpec& spec, TimePoint now);
  // FailedPrecondition while any job holds resources on it.
  absl::Status RemoveNode(const std::string& name);
  // Returns the jobs holding resources on the node (the caller ends them when
  // the node goes DOWN). DRAINING with nothing held becomes DRAINED.
  absl::StatusOr<std::vector<JobId>> SetState(const std::string& name, MemberState state);
  absl::Status Heartbeat(const std::string& name, TimePoint now);
  // Sets the node's drain flag and reason (see MemberNode).
  absl::Status SetNote(const std::string& name, bool drain, std::string reason);
  // Sets the digests the node's agent has cached (see MemberNode).
  absl::Status SetCachedImages(const std::string& name, std::vector<std::string> digests);

  // Takes `gpus` free GPUs (lowest ids first) plus CPU/RAM on node `index`.
  // Programmer error if they are not free.
  NodeAllocation Allocate(int index, const JobId& job, int gpus, int cpus, int64_t memory_mb);
  // Takes exactly `gpu_ids` (restore after a coordinator restart).
  absl::Status AllocateExact(int index, const JobId& job, const std::vector<int>& gpu_ids,
                             int cpus, int64_t memory_mb);
  // Returns everything `job` holds on node `index`.
  void Release(int index, const JobId& job);

  std::optional<int> Find(const std::string& name) const;
  int size() const { return static_cast<int>(nodes_.size()); }  // removed ones included
  int registered() const { return static_cast<int>(by_name_.size()); }  // not removed
  const MemberNode& node(int index) const { return nodes_[index]; }
  // UP nodes of `model` with exactly `free` free GPUs, by index; nullptr if none.
  const std::set<int>* Bucket(const std::string& model, int free) const;
  // Models present among UP nodes, and the largest GPU count of any node.
  std::vector<std::string> Models() const;
  int max_gpus() const { return max_gpus_; }
  // Interned label values ("switch" or "rack" groups), by group id.
  const std::vector<std::string>& switch_groups() const { return switch_names_; }
  const std::vector<std::string>& rack_groups() const { return rack_names_; }
  // Bumped whenever the set of nodes or their inventory changes.
  uint64_t inventory_version() const { return inventory_version_; }

 private:
  void Unindex(int index);
  void Index(int index);
  void InternLabels(MemberNode& record);

  std::vector<MemberNode> nodes_;
  std::unordered_map<std::string, int> by_name_;
  // model -> free GPU count -> UP node indices.
  std::map<std::string, std::vector<std::set<int>>> free_index_;
  int max_gpus_ = 0;
  std::vector<std::string> switch_names_, rack_names_;
  std::unordered_map<std::string, int> switch_ids_, rack_ids_;
  uint64_t inventory_version_ = 0;
};

// Whether a node's inventory could ever host one node's share of `job`.
bool StaticallyFits(const NodeSpec& spec, const JobRequest& job);

}  // namespace athanor::sched
