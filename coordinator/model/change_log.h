// ChangeLog: which records the coordinator's state changed since they were
// last taken for the store, and the desired-state generations agents
// long-poll on.
//
// Every part of ClusterState marks what it changes here; ClusterState turns
// the marks into a Changes batch (records to persist) with Take(). A node's
// generation moves whenever the ranks it should run change; agents echo the
// generation they hold and are answered as soon as theirs is old. Generations
// come from one counter that starts at the construction time in milliseconds,
// so they keep growing across coordinator restarts.
//
// Not thread-safe: confined to ClusterState's owner, like the state itself.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "coordinator/model/state_types.h"  // ImageChange, VolumeChange
#include "coordinator/model/types.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

class ChangeLog {
 public:
  explicit ChangeLog(uint64_t first_generation) : generation_(first_generation) {}

  void MarkJob(int64_t seq) {
    jobs_.insert(seq);
    ++marks_;
  }
  void MarkNode(const std::string& name) {
    nodes_.insert(name);
    ++marks_;
  }
  // Grows with every mark: equal before and after an operation when it
  // changed no record.
  uint64_t mark_count() const { return marks_; }
  // `gpus` < 0: the tenant's quota was removed.
  void MarkQuota(const std::string& tenant, int32_t gpus) { quotas_[tenant] = gpus; }

  // Billing's records (core/tenant_billing.h): prices and plans as set,
  // ledger entries as appended, each persisted once.
  void MarkPrice(billing::Price price) {
    prices_.push_back(std::move(price));
    ++marks_;
  }
  void MarkPlan(billing::Plan plan) {
    plans_.push_back(std::move(plan));
    ++marks_;
  }
  void MarkLedger(billing::LedgerEntry entry) {
    ledger_.push_back(std::move(entry));
    ++marks_;
  }

  // Images (core/cluster_images.h): a record as set or removed, in order.
  void MarkImage(rpc::Image image, bool removed) {
    images_.push_back({std::move(image), removed});
    ++marks_;
  }

  // Volumes (core/cluster_volumes.h): a record as set or removed, in order.
  void MarkVolume(rpc::Volume volume, bool removed) {
    volumes_.push_back({std::move(volume), removed});
    ++marks_;
  }

  // Instance snapshots (core/cluster_snapshots.h): a record as set or removed, in order.
  void MarkSnapshot(rpc::InstanceSnapshot snapshot, bool removed) {
    snapshots_.push_back({std::move(snapshot), removed});
    ++marks_;
  }

  // The ranks `node` should run changed.
  void TouchNode(const std::string& node) {
    node_generation_[node] = ++generation_;
    touched_.insert(node);
  }
  // 0 for a node whose desired set never changed.
  uint64_t NodeGeneration(const std::string& node) const {
    auto it = node_generation_.find(node);
    return it == node_generation_.end() ? 0 : it->second;
  }
  // The newest generation handed to any node.
  uint64_t generation() const { return generation_; }

  struct Marks {
    std::set<int64_t> jobs;
    std::set<std::string> nodes;
    std::map<std::string, int32_t> quotas;
    std::set<std::string> touched;  // nodes whose desired set changed
    uint64_t generation = 0;        // generation() when taken
    std::vector<billing::Price> prices;
    std::vector<billing::Plan> plans;
    std::vector<billing::LedgerEntry> ledger;
    std::vector<ImageChange> images;
    std::vector<VolumeChange> volumes;
    std::vector<SnapshotChange> snapshots;
  };
  Marks Take() {
    Marks m{std::move(jobs_), std::move(nodes_), std::move(quotas_), std::move(touched_),
            generation_, std::move(prices_), std::move(plans_), std::move(ledger_),
            std::move(images_), std::move(volumes_), std::move(snapshots_)};
    jobs_.clear();
    nodes_.clear();
    quotas_.clear();
    touched_.clear();
    prices_.clear();
    plans_.clear();
    ledger_.clear();
    images_.clear();
    volumes_.clear();
    snapshots_.clear();
    return m;
  }
 private:
  std::set<int64_t> jobs_;
  std::set<std::string> nodes_;
  std::map<std::string, int32_t> quotas_;
  std::set<std::string> touched_;
  std::vector<billing::Price> prices_;
  std::vector<billing::Plan> plans_;
  std::vector<billing::LedgerEntry> ledger_;
  std::vector<ImageChange> images_;
  std::vector<VolumeChange> volumes_;
  std::vector<SnapshotChange> snapshots_;
  std::unordered_map<std::string, uint64_t> node_generation_;
  uint64_t generation_;
  uint64_t marks_ = 0;
};

// Marks the desired sets of every node of the job's attempt changed.
inline void TouchAttemptNodes(ChangeLog* log, const JobRecord& job) {
  const std::string* last = nullptr;
  for (const RankPlacement& p : job.allocation) {  // node-major: one touch per node
    if (last != nullptr && p.node == *last) continue;
    log->TouchNode(p.node);
    last = &p.node;
  }
}

}  // namespace athanor::coord
