// EtcdStore: the Store (store/store.h) on etcd, for coordinators that share
// their state and take over from each other (leader_election.h).
//
// Keys, under the EtcdUri's prefix P, one record per key, its value the same
// JSON row SqliteStore writes (store/record_codec.h):
//   P/jobs/<seq, 20 digits>      JobRecord (by seq, so a range is in order)
//   P/nodes/<name>               NodeRecord
//   P/quotas/<tenant>            GPUs (decimal)
//   P/prices/<model>/<effective unix, 20 digits>
//   P/plans/<tenant>
//   P/ledger/<id, 20 digits>
//   P/images/<tenant>/<name>, P/volumes/<tenant>/<name>, P/snapshots/<id>
//   P/leader                     the leader's address (leader_election.h)
// A '/' or '%' in a name is written %2F or %25, so that keys stay apart.
//
// Commit: one etcd transaction per batch, guarded by the leader's fence: the
// batch is durable on a majority of members when it returns OK, and a
// deposed leader's batch is refused (FailedPrecondition "fenced: ..."; the
// store then calls `on_fenced`, and the coordinator exits). A batch of more
// operations than etcd takes in one transaction (`max_txn_ops`, etcd's
// --max-txn-ops) is refused InvalidArgument before it is sent: the group
// committer caps its batches below it (max_batch_records()).
// Ledger keys are only ever created (each compared version 0); one that
// already holds the very row being written counts as written (a retried
// batch whose first answer was lost), one holding another entry fails the
// batch Internal, as SQLite's primary key does.
// LoadAll: ranges over P/ in pages of `page` keys at one revision: every
// page must see the revision the first one saw, else (a write in between)
// the load starts over, at most 5 times, then fails Unavailable.
//
// Not thread-safe: the owner (the GroupCommitter's thread) serialises calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "coordinator/store/etcd/etcd_client.h"
#include "coordinator/store/store.h"

namespace athanor::coord::etcd {

class EtcdStore final : public Store {
 public:
  struct Options {
    std::string prefix;
    Compare fence;                    // LeaderElection::Fence()
    int max_txn_ops = 128;            // etcd's default --max-txn-ops
    int64_t page = 1000;
    std::function<void()> on_fenced;  // required
  };
  // `client` is not owned and outlives the store.
  EtcdStore(EtcdClient* client, Options options);
  ~EtcdStore() override;

  absl::Status Commit(const Changes& changes) override;
  absl::StatusOr<Contents> LoadAll() override;
  StoreLog log() const override { return {}; }

  // How many records one Commit may hold (one put per record).
  int max_batch_records() const { return options_.max_txn_ops - 1; }
  size_t max_commit_records() const override {
    return max_batch_records() > 0 ? static_cast<size_t>(max_batch_records()) : 1;
  }

 private:
  EtcdClient* const client_;
  const Options options_;
};

}  // namespace athanor::coord::etcd
