// athanor-train's skipped-collective test hook, for hang tests only:
// ATHANOR_TEST_SKIP_ALLREDUCE=RANK:STEP[:ATTEMPT] makes rank RANK of attempt
// ATTEMPT (default 1; the requeued attempt trains normally) skip the first
// all-reduce it issues during step STEP. The skipped call is not sent: it
// returns at once as done (the buffer keeps this rank's own values), but it
// still takes its issue number on the progress page, so the rank stands for
// one that went past a collective its peers are in. Its peers then block in
// that all-reduce, and the rank blocks in a later one: a hang that only the
// collective timeout or the coordinator's hang detection ends
// (docs/operations.md, "Hangs and stragglers").
//
// Threading: SetStep and the collectives are called from the training thread;
// the other methods forward to `inner` (not owned; it must outlive this).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "common/rank_env.h"

namespace athanor {

struct SkipPlan {
  int rank = -1;  // -1: off
  int64_t step = -1;
  int attempt = 1;
  // True when the plan is for this rank of this attempt (an attempt of 0, as
  // under athanor-run or mpirun, counts as the first).
  bool AppliesTo(int r, int a) const { return rank >= 0 && r == rank && std::max(a, 1) == attempt; }
};

// InvalidArgument naming the variable and the expected form for a malformed
// value; an off plan when `spec` is empty.
absl::StatusOr<SkipPlan> ParseSkipPlan(const std::string& spec);
// The plan in ATHANOR_TEST_SKIP_ALLREDUCE of `env`.
absl::StatusOr<SkipPlan> SkipPlanFromEnv(const EnvLookup& env);

class SkipAllReduceCommunicator : public Communicator {
 public:
  SkipAllReduceCommunicator(Communicator* inner, const SkipPlan& plan)
      : inner_(inner), plan_(plan) {}

  // The step the training loop runs now.
  void SetStep(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  bool fired() const { return fired_.load(std::memory_order_relaxed); }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend() const override { return inner_->backend(); }
  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override;
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& options) override {
    return inner_->ReduceScatterAsync(send, recv, recv_count, type, op, options);
  }
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& options) override {
    return inner_->AllGatherAsync(send, recv, send_count, type, options);
  }
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& options) override {
    return inner_->BroadcastAsync(buffer, count, type, root, options);
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& options) override {
    return inner_->BarrierAsync(options);
  }
  void Abort() override { inner_->Abort(); }

 private:
  Communicator* const inner_;
  const SkipPlan plan_;
  std::atomic<int64_t> step_{-1};
  std::atomic<bool> fired_{false};
};

}  // namespace athanor
