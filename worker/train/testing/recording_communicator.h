// RecordingCommunicator: a single-threaded fake that pretends to be one rank
// of `world_size` identical ranks: an all-reduce sum multiplies by
// world_size (max leaves values alone) and completes at once. Every call is
// recorded, and an optional hook sees each call before it completes.
// Not thread-safe; test-only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "worker/train/testing/all_reduce_only_communicator.h"

namespace athanor {

class RecordingCommunicator final : public AllReduceOnlyCommunicator {
 public:
  struct Call {
    uint64_t tag;
    size_t count;
    DataType type;
    ReduceOp op;
    const void* send;
  };
  explicit RecordingCommunicator(int world_size) : world_size_(world_size) {}

  int rank() const override { return 0; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "recording"; }
  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override;

  const std::vector<Call>& calls() const { return calls_; }
  std::function<void(const Call&)> on_call;

 private:
  const int world_size_;
  std::vector<Call> calls_;
};

}  // namespace athanor
