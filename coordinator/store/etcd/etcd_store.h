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
//   P/round                      the last round that landed (20 digits)
// A '/' or '%' in a name is written %2F or %25, so that keys stay apart.
//
// Commit: one etcd transaction per batch, guarded by the leader's fence: the
// batch is durable on a majority of members when it returns OK, and a
// deposed leader's batch is refused (FailedPrecondition "fenced: ..."; the
// store then calls `on_fenced`, and the coordinator exits). A batch of more
// operations than etcd takes in one transaction (`max_txn_ops`, etcd's
// --max-txn-ops) is refused InvalidArgument before it is sent: the group
// committer caps its batches below it (max_batch_records()).
// CommitRound (store.h): the same transaction, also comparing P/round with
// the round before and setting it to this one; up to kRoundsInFlight at once
// from the group committer's writers, which etcd's Raft appends together.
// Ledger keys are only ever created (each compared version 0); one that
// already holds the very row being written counts as written (a retried
// batch whose first answer was lost), one holding another entry fails the
// batch Internal, as SQLite's primary key does.
// LoadAll: ranges over P/ in pages of `page` keys at one revision: every
// page must see the revision the first one saw, else (a write in between)
// the load starts over, at most 5 times, then fails Unavailable.
//
// Thread-safe (the client is; the store keeps no state of its own).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

  static constexpr int kRoundsInFlight = 4;

  absl::Status Commit(const Changes& changes) override;
  int max_rounds_in_flight() const override { return kRoundsInFlight; }
  absl::Status CommitRound(const Changes& changes, uint64_t round) override;
  absl::StatusOr<uint64_t> LastRound() override;
  absl::StatusOr<Contents> LoadAll() override;
  StoreLog log() const override { return {}; }

  // How many records one Commit may hold (one put per record, beside the
  // round's; one compare each for the fence and the round).
  int max_batch_records() const { return options_.max_txn_ops - 2; }
  size_t max_commit_records() const override {
    return max_batch_records() > 0 ? static_cast<size_t>(max_batch_records()) : 1;
  }

 private:
  absl::Status Write(const Changes& changes, std::optional<uint64_t> round);
  std::string RoundKey() const;
  // The round a range of RoundKey() read (0: the key does not exist).
  absl::StatusOr<uint64_t> RoundIn(const std::vector<KeyValue>& found) const;

  EtcdClient* const client_;
  const Options options_;
};

}  // namespace athanor::coord::etcd
