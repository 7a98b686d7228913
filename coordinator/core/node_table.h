// NodeTable: the coordinator's nodes.
//
// The table itself is the scheduler's Membership (inventory, addresses, state,
// which job holds which GPU, drain flag and reason): it exists once, and this
// class reads and changes it through the Scheduler. Beside it NodeTable keeps
// only what a live coordinator learns from agents and never persists: whether
// a node's agent registered since this process started, the desired-state
// generation it acknowledged, the ranks it says run there, and its health
// check's last result.
//
// Every change to a persisted field is marked in the ChangeLog.
// Not thread-safe: confined to ClusterState's owner. The scheduler, log and
// clock are not owned and outlive the table.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::coord {

// A rank as (job id, attempt, rank).
using RankKey = std::tuple<std::string, int32_t, int32_t>;

class NodeTable {
 public:
  NodeTable(sched::Scheduler* sched, ChangeLog* log, const WallClock* clock)
      : sched_(sched), log_(log), clock_(clock) {}

  // Nodes from the store after a restart: UNKNOWN (DOWN stays DOWN) until
  // their agents register again; running jobs keep their GPUs there.
  void Restore(const std::vector<NodeRecord>& nodes);

  // An agent (re)registers: the node is UP (DRAINING if it was drained) and
  // `ranks` is what runs there. InvalidArgument naming a bad field.
  absl::Status Register(const NodeRecord& node, const std::vector<RankReport>& ranks);

  enum class Beat { kUnregistered, kOk, kHealthFailed };
  // A heartbeat: liveness, the acknowledged generation and the running
  // ranks. kHealthFailed on the edge from a passing to a failing health
  // check (the caller drains the node); kUnregistered when the agent must
  // register first.
  Beat Heartbeat(const std::string& name, uint64_t acked_generation,
                 const std::vector<RankReport>& ranks, bool health_ok);

  // Nodes silent for longer than `timeout` go DOWN; returns (name, why).
  std::vector<std::pair<std::string, std::string>> Expire(Duration timeout);

  // DRAINING (DRAINED once empty; a DOWN/UNKNOWN node keeps its state and
  // drains when it comes back). NotFound for an unknown node.
  absl::Status Drain(const std::string& name, const std::string& reason);
  absl::Status Undrain(const std::string& name);
  // The digests in the node's agent's image cache, as its last heartbeat
  // said (memory only: agents say it again after a restart). Ignored for an
  // unknown node.
  void SetCachedImages(const std::string& name, std::vector<std::string> digests);
  // Marks every node of `nodes` changed (their holds or state moved).
  void Touched(const std::vector<std::string>& nodes);

  std::optional<NodeRecord> Get(const std::string& name) const;
  std::optional<NodeView> View(const std::string& name) const;
  std::vector<NodeView> Views() const;  // by name
  bool Exists(const std::string& name) const { return sched_->view().membership().Find(name).has_value(); }
  bool IsDown(const std::string& name) const;
  // Ids of the jobs holding GPUs on the node (also while they stop).
  std::vector<std::string> JobsOn(const std::string& name) const;

  // A stopped rank is settled once its node acknowledged `generation` and no
  // longer runs it (or the node is DOWN).
  bool Settled(const std::string& name, const RankKey& rank, uint64_t generation) const;
  // Whether the node's agent runs the rank (as of its last report).
  bool Runs(const std::string& name, const RankKey& rank) const;

 private:
  struct Runtime {
    bool registered = false;  // since this coordinator started
    bool health_failed = false;
    uint64_t acked_generation = 0;
    std::set<RankKey> running;
  };
  const sched::MemberNode* Find(const std::string& name) const;
  NodeRecord ToRecord(const sched::MemberNode& n) const;
  // The state a reachable node should have: DRAINING if drained, else UP.
  absl::Status SetReachable(const std::string& name, bool drain);

  sched::Scheduler* const sched_;
  ChangeLog* const log_;
  const WallClock* const clock_;
  std::map<std::string, Runtime> runtime_;
};

}  // namespace athanor::coord
