// Store: where the coordinator's records become durable. CoordinatorCore
// commits through this interface only; SqliteStore (store/sqlite/) is the
// first implementation, a replicated store (etcd) the next.
//
// Not thread-safe: the owner (the GroupCommitter's thread) serialises calls.
// Errors are Unavailable (may succeed if retried: the committer keeps the
// batch and retries it with the next round) or Internal (the backend refused
// or returned what it cannot read), with the backend's own message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/types.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

// The store's write-ahead log after a commit (for /metrics); zeros for a
// backend without one.
struct StoreLog {
  int pages = 0;                        // in the log
  uint64_t checkpointer_passes = 0;     // by the store's checkpointer thread, ever
  uint64_t commit_checkpoints = 0;      // inside commits, ever
};

class Store {
 public:
  // Everything the store holds, as restored after a restart.
  struct Contents {
    std::vector<JobRecord> jobs;  // by seq
    std::vector<NodeRecord> nodes;
    std::map<std::string, int32_t> quotas;  // set by `athanor quota`; < 0: removed
    std::vector<billing::Price> prices;     // newest per (model, effective time)
    std::vector<billing::Plan> plans;       // newest per tenant
    std::vector<billing::LedgerEntry> ledger;  // by id
    std::vector<rpc::Image> images;         // by (tenant, name)
    std::vector<rpc::Volume> volumes;       // by (tenant, name)
    std::vector<rpc::InstanceSnapshot> snapshots;  // by id
  };

  virtual ~Store() = default;

  // Writes one batch of changed records atomically: when it returns OK the
  // whole batch survives a crash of the process (kill -9); when it fails,
  // none of it is visible. Blocks until durable.
  virtual absl::Status Commit(const Changes& changes) = 0;

  // Reads every record back. Blocks.
  virtual absl::StatusOr<Contents> LoadAll() = 0;

  // The log as the newest Commit() left it; cheap, no I/O.
  virtual StoreLog log() const = 0;

  // How many records (RecordCount, group_commit.h) one Commit takes at
  // most: the group committer keeps its rounds within it. No limit unless a
  // backend has one (etcd's --max-txn-ops).
  virtual size_t max_commit_records() const { return SIZE_MAX; }
};

}  // namespace athanor::coord
