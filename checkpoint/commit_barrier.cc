#include "checkpoint/commit_barrier.h"

#include "absl/strings/str_cat.h"

namespace athanor {

absl::StatusOr<bool> InProcessCommitBarrier::AllDurable(int64_t step, bool mine) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return absl::AbortedError("commit barrier aborted");
  if (arrived_ == 0) {
    round_step_ = step;
    all_ = true;
    step_mismatch_ = false;
  }
  if (step != round_step_) step_mismatch_ = true;
  all_ = all_ && mine;
  uint64_t my_generation = generation_;
  if (++arrived_ == world_size_) {
    last_result_ = all_ && !step_mismatch_;
    last_mismatch_ = step_mismatch_;
    arrived_ = 0;
    ++generation_;
    cv_.SignalAll();
  } else {
    while (!(generation_ != my_generation || aborted_)) cv_.Wait(&mu_);
    if (generation_ == my_generation) return absl::AbortedError("commit barrier aborted");
  }
  if (last_mismatch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ranks disagreed on the step at the commit barrier (this rank: ", step, ")"));
  }
  return last_result_;
}

void InProcessCommitBarrier::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
  cv_.SignalAll();
}

}  // namespace athanor
