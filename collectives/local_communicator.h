// LocalCommunicator: the world_size 1 communicator; no network, no threads.
//
// Every collective completes inside the call: out-of-place calls copy `send`
// to `recv` (host memory), in-place calls do nothing. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "collectives/communicator.h"

namespace athanor {

// A Work that is already finished with `status`.
std::unique_ptr<Work> MakeDoneWork(absl::Status status);

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(std::string backend) : backend_(std::move(backend)) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return backend_; }

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
  void Abort() override { aborted_ = true; }

 private:
  std::unique_ptr<Work> Copy(const void* send, void* recv, size_t bytes);

  const std::string backend_;
  std::atomic<bool> aborted_{false};
};

}  // namespace athanor
