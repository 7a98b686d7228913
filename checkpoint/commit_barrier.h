// CommitBarrier: the one collective the checkpoint library needs, as an
// interface, so it does not depend on collectives/. The trainer implements it
// with an all-reduce (min over a 0/1 flag); tests and the benchmark use
// InProcessCommitBarrier (ranks as threads).
//
// AllDurable(step, mine) blocks until every rank of the job has called it for
// the same `step`, then returns true on every rank iff `mine` was true on
// every rank. It is called once per checkpoint by the checkpointer's upload
// thread, and once per candidate step by Restore (never concurrently on one
// rank). An error (a dead peer, a timeout) means no agreement: the caller
// treats it as "not durable".
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/status/statusor.h"

namespace athanor {

class CommitBarrier {
 public:
  virtual ~CommitBarrier() = default;
  virtual absl::StatusOr<bool> AllDurable(int64_t step, bool mine) = 0;
};

// For ranks that are threads of one process: one shared object, called by
// `world_size` threads per round. Thread-safe. Abort() releases waiters with
// an Aborted error (for tests that kill a "rank").
class InProcessCommitBarrier final : public CommitBarrier {
 public:
  explicit InProcessCommitBarrier(int world_size) : world_size_(world_size) {}
  absl::StatusOr<bool> AllDurable(int64_t step, bool mine) override;
  void Abort();

 private:
  const int world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;          // guarded by mu_
  bool all_ = true;          // guarded by mu_; this round's running AND
  int64_t round_step_ = -1;  // guarded by mu_
  bool step_mismatch_ = false;  // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_
  bool last_result_ = false;  // guarded by mu_; result of generation_ - 1
  bool last_mismatch_ = false;  // guarded by mu_
  bool aborted_ = false;     // guarded by mu_
};

}  // namespace athanor
