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
// Pipelined rounds: with a store whose max_rounds_in_flight() is above 1
// (etcd), up to that many rounds are written at once, each numbered and
// written by a writer thread with Store::CommitRound, which lands a round
// only right after the one before it. Rounds finish in order: a round's
// callers hear of it only once every earlier round has been heard of. When
// a round fails, the committer waits for the rounds after it, asks the store
// which round landed last (Store::LastRound), tells the callers of those that
// did OK, carries the rest (in order) into the next round and tells their
// callers Unavailable, as with one round at a time.
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
#include <vector>

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

  // Called with how long each store write took and the store's log after
  // it: on the committer thread, or (pipelined) on a writer's, one call at a
  // time either way.
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
  // A pipelined round.
  struct Flight {
    uint64_t round = 0;  // 0: nothing to write (empty batches only)
    std::deque<Batch> batches;
    Changes merged;
    std::set<std::string> touched;
    uint64_t generation = 0;
    std::shared_ptr<Flight> before;  // the round written before it (null once written)
    bool written = false;            // its write returned (under mu_)
    absl::Status status;             // set with written
  };
  void Loop();
  // With max_rounds_in_flight() > 1.
  void LoopPipelined(size_t depth);
  void WriterLoop();
  // Tells a finished round's callers `s`, then (OK) on_durable.
  void Finish(Flight& f, const absl::Status& s);
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
  // Pipelined: rounds in flight, oldest first, and those no writer took yet.
  std::deque<std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Flight>> to_write_ ABSL_GUARDED_BY(mu_);
  bool writers_stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex on_write_mu_;  // pipelined writers call on_write_ one at a time
  std::vector<std::thread> writers_;
  std::thread thread_;
};

}  // namespace athanor::coord
