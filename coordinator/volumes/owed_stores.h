// OwedStores: the read-write volume stores that requeued jobs' ended
// attempts still owe (docs/operations.md, "Volumes"). An attempt whose rank
// started on a node syncs each read-write volume it mounts back from there
// when its last rank there ends (NodeData.StoreVolume; an unchanged or
// unstorable copy is a store call of no content). Until that call ends, the
// job's next attempt must not fetch the volume: it would start from the
// older generation, and its own store would then be refused. The core holds
// such a job in the scheduler (core/cluster_volumes.h) while this class
// says it owes.
//
// A debt ends when its store call ends (whatever its outcome: the volume
// keeps its last committed content on a failure), when its node is lost
// (DOWN, or its agent registered again: the copy is gone), or `max_wait`
// after the attempt ended. In memory only: after a coordinator restart no
// job waits.
//
// Not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

class OwedStores {
 public:
  struct Owed {
    std::string job_id;
    int32_t attempt = 0;
    std::string node;
    std::string volume;
    TimePoint until;  // given up on then
  };

  explicit OwedStores(Duration max_wait) : max_wait_(max_wait) {}

  // `job`'s attempt ended (its ranks' statuses still those of the attempt);
  // when the job is requeued, each node where one of its ranks started owes
  // a store of each read-write volume the job mounts, unless its call ended
  // already (EndedEarly). Nodes `lost` says are gone owe nothing.
  template <typename Lost>
  void AttemptEnded(const JobRecord& job, TimePoint now, Lost lost, bool requeued) {
    const std::set<Key> early = TakeEarly(job.id);
    if (!requeued) return;
    std::set<std::string> nodes;
    for (const RankPlacement& p : job.allocation) {
      if (p.rank >= 0 && static_cast<size_t>(p.rank) < job.ranks.size() && job.ranks[p.rank].started &&
          !lost(p.node)) {
        nodes.insert(p.node);
      }
    }
    for (const std::string& node : nodes) {
      for (const VolumeMount& m : job.spec.volumes) {
        if (m.read_only || early.count({job.attempt, node, m.name}) > 0 || early.count({job.attempt, "", m.name}) > 0) {
          continue;
        }
        owed_[job.id].push_back({job.id, job.attempt, node, m.name, now + max_wait_});
      }
    }
  }
  // A store call of `volume` by attempt `attempt` of `job_id` from `node`
  // ("": any node, --insecure) ended. True when it was owed.
  bool Reported(const std::string& node, const std::string& job_id, int32_t attempt, const std::string& volume);
  // The same call while its attempt is still being stopped (the agent
  // stored as the ranks ended, before the coordinator saw them end): the
  // debt AttemptEnded would make is paid already. `node` "" : --insecure,
  // where no call proves a node: every node's.
  void EndedEarly(const std::string& node, const std::string& job_id, int32_t attempt, const std::string& volume) {
    early_[job_id].insert({attempt, node, volume});
  }
  // `node` is lost: what it owed, dropped.
  std::vector<Owed> NodeLost(const std::string& node);
  // Debts past their time, dropped.
  std::vector<Owed> Expire(TimePoint now);
  // The first debt of job `id` (the oldest attempt's, in mount order).
  std::optional<Owed> First(const std::string& id) const;
  void Forget(const std::string& id) { owed_.erase(id); }
  std::set<std::string> Jobs() const;
  Duration max_wait() const { return max_wait_; }

 private:
  using Key = std::tuple<int32_t, std::string, std::string>;  // attempt, node, volume
  std::set<Key> TakeEarly(const std::string& id) {
    std::set<Key> out;
    if (auto it = early_.find(id); it != early_.end()) {
      out = std::move(it->second);
      early_.erase(it);
    }
    return out;
  }

  const Duration max_wait_;
  std::map<std::string, std::set<Key>> early_;  // by job id, until its attempt ends
  std::map<std::string, std::vector<Owed>> owed_;  // by job id, in the order owed
};

}  // namespace athanor::coord
