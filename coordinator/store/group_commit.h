// GroupCommitter: makes the coordinator's changes durable, many operations
// per fsync, off the state lock.
//
// Operations change the state under the state lock and hand their changed
// records to Commit() before releasing it, so batches arrive in state order.
// One thread takes every batch queued so far, merges them (a later snapshot
// of a record replaces an earlier one) and writes them in one store
// transaction; then it tells each batch's caller. A caller acknowledges its
// client only then, so every acknowledged transition is durable.
//
// A failed write is kept and retried with the next round (or after a short
// backoff); its callers are told Unavailable meanwhile. Idempotent clients
// (submissions with a key) simply retry.
//
// `max_round_records` (and the store's own max_commit_records(), whichever is
// smaller) caps a round (RecordCount of the merged batches) for a store that
// takes only so many records in one transaction (etcd): queued
// batches join a round only while it stays within the cap, the rest wait for
// the next one. A batch is never split (it is one operation's atomic change):
// one over the cap alone still makes a round of its own.
//
// Thread-safe. `on_durable` and the `done` callbacks run on the committer
// thread with no lock of this class held. The store is owned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/store/store.h"

namespace athanor::coord {

// How many records a batch holds: the unit of a round's cap and of a store's
// limit on one Commit (each job, node, quota, price, plan, ledger entry,
// image, volume and snapshot change counts one).
size_t RecordCount(const Changes& changes);

class GroupCommitter {
 public:
  using Done = std::function<void(absl::Status)>;
  // Called after each durable round with the nodes whose desired sets moved
  // in it and the newest generation it holds, after the round's `done` callbacks.
  using OnDurable = std::function<void(const std::set<std::string>& nodes, uint64_t generation)>;

  // Called on the committer thread with how long each store write took and
  // the store's log after it.
  using OnWrite = std::function<void(Duration, const StoreLog&)>;
  static constexpr size_t kNoLimit = SIZE_MAX;
  GroupCommitter(std::unique_ptr<Store> store, OnDurable on_durable, OnWrite on_write = nullptr,
                 size_t max_round_records = kNoLimit);
  ~GroupCommitter();  // commits what is queued, then stops

  // Queues a batch (possibly empty: the caller then waits for everything
  // queued before it). `done` gets OK once it is durable.
  void Commit(Changes changes, std::set<std::string> touched_nodes, uint64_t generation,
              Done done);

  struct Stats {
    uint64_t rounds = 0;   // transactions written
    uint64_t batches = 0;  // operations they carried
  };
  Stats stats() const;

 private:
  struct Batch {
    Changes changes;
    std::set<std::string> touched;
    uint64_t generation = 0;
    Done done;
  };
  void Loop();
  // Merges `from` into `into`: later records replace earlier ones.
  static void Merge(Changes* into, Changes from);

  const std::unique_ptr<Store> store_;  // used by the committer thread only
  const OnDurable on_durable_;
  const OnWrite on_write_;
  const size_t max_round_records_;
  mutable absl::Mutex mu_;
  std::deque<Batch> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace athanor::coord
