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

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
  absl::Mutex mu_;
  absl::CondVar cv_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  bool all_ ABSL_GUARDED_BY(mu_) = true;  // this round's running AND
  int64_t round_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool step_mismatch_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool last_result_ ABSL_GUARDED_BY(mu_) = false;  // result of generation_ - 1
  bool last_mismatch_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace athanor
