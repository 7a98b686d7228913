#include "collectives/progress_communicator.h"

#include <utility>

#include "collectives/blocking_hint.h"

namespace athanor {
namespace {

class TrackedWork : public Work {
 public:
  TrackedWork(std::unique_ptr<Work> inner, ProgressWriter* writer, uint64_t seq, ProgressOp op)
      : inner_(std::move(inner)), writer_(writer), seq_(seq), op_(op) {}

  absl::Status Wait(std::chrono::milliseconds timeout) override {
    if (inner_->Done()) return inner_->Wait(timeout);
    writer_->WaitBegin(seq_, op_);
    absl::Status s = inner_->Wait(timeout);
    writer_->WaitEnd();
    return s;
  }
  bool Done() override { return inner_->Done(); }

 private:
  const std::unique_ptr<Work> inner_;
  ProgressWriter* const writer_;
  const uint64_t seq_;
  const ProgressOp op_;
};

}  // namespace

std::unique_ptr<Work> ProgressCommunicator::Track(
    ProgressOp op, absl::FunctionRef<std::unique_ptr<Work>()> issue) {
  const uint64_t seq = writer_->CollectiveIssued();
  // A blocking wrapper's call may finish inside the issue (the ucx backend's
  // two-rank exchange does): then the issue is the wait, and a rank stuck
  // there must show as waiting in it.
  const bool blocking = collectives_internal::InBlockingCall();
  if (blocking) writer_->WaitBegin(seq, op);
  std::unique_ptr<Work> work = issue();
  if (blocking) writer_->WaitEnd();
  return std::make_unique<TrackedWork>(std::move(work), writer_, seq, op);
}

std::unique_ptr<Work> ProgressCommunicator::AllReduceAsync(const void* send, void* recv,
                                                           size_t count, DataType type, ReduceOp op,
                                                           const CollectiveOptions& options) {
  return Track(ProgressOp::kAllReduce,
               [&] { return inner_->AllReduceAsync(send, recv, count, type, op, options); });
}

std::unique_ptr<Work> ProgressCommunicator::ReduceScatterAsync(const void* send, void* recv,
                                                               size_t recv_count, DataType type,
                                                               ReduceOp op,
                                                               const CollectiveOptions& options) {
  return Track(ProgressOp::kReduceScatter, [&] {
    return inner_->ReduceScatterAsync(send, recv, recv_count, type, op, options);
  });
}

std::unique_ptr<Work> ProgressCommunicator::AllGatherAsync(const void* send, void* recv,
                                                           size_t send_count, DataType type,
                                                           const CollectiveOptions& options) {
  return Track(ProgressOp::kAllGather,
               [&] { return inner_->AllGatherAsync(send, recv, send_count, type, options); });
}

std::unique_ptr<Work> ProgressCommunicator::BroadcastAsync(void* buffer, size_t count,
                                                           DataType type, int root,
                                                           const CollectiveOptions& options) {
  return Track(ProgressOp::kBroadcast,
               [&] { return inner_->BroadcastAsync(buffer, count, type, root, options); });
}

std::unique_ptr<Work> ProgressCommunicator::BarrierAsync(const CollectiveOptions& options) {
  return Track(ProgressOp::kBarrier, [&] { return inner_->BarrierAsync(options); });
}

}  // namespace athanor
