// ProgressCommunicator: a Communicator that publishes its collectives on a
// rank's progress page (common/progress_page.h) and forwards every call to
// the one it wraps. Each *Async call counts one collective (its issue number
// is the "collective sequence number" hang reports name); a Wait on the
// returned Work marks the rank blocked in that collective until it returns,
// as does the issue itself under a blocking wrapper (AllReduce, ...), which a
// backend may complete before returning.
//
// Threading: as the wrapped Communicator. Neither `inner` nor `writer` is
// owned; both must outlive this object and every Work it returned.
#pragma once

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "collectives/communicator.h"
#include "common/progress_page.h"

namespace athanor {

class ProgressCommunicator : public Communicator {
 public:
  ProgressCommunicator(Communicator* inner, ProgressWriter* writer)
      : inner_(inner), writer_(writer) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend() const override { return inner_->backend(); }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override;
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& options) override;
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& options) override;
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& options) override;
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& options) override;
  void Abort() override { inner_->Abort(); }

 private:
  // Counts the collective, then issues it.
  std::unique_ptr<Work> Track(ProgressOp op, absl::FunctionRef<std::unique_ptr<Work>()> issue);

  Communicator* const inner_;
  ProgressWriter* const writer_;
};

}  // namespace athanor
