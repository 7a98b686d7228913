#include "collectives/local_communicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace athanor {
namespace {

class DoneWork final : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait(std::chrono::milliseconds) override { return status_; }
  bool Done() override { return true; }

 private:
  absl::Status status_;
};

}  // namespace

std::unique_ptr<Work> MakeDoneWork(absl::Status status) {
  return std::make_unique<DoneWork>(std::move(status));
}

std::unique_ptr<Work> LocalCommunicator::Copy(const void* send, void* recv, size_t bytes) {
  if (aborted_) return MakeDoneWork(absl::AbortedError("communicator was aborted"));
  if (send != recv && bytes > 0) std::memmove(recv, send, bytes);
  return MakeDoneWork(absl::OkStatus());
}

std::unique_ptr<Work> LocalCommunicator::AllReduceAsync(const void* send, void* recv,
                                                        size_t count, DataType type, ReduceOp,
                                                        const CollectiveOptions&) {
  return Copy(send, recv, count * DataTypeSize(type));
}

std::unique_ptr<Work> LocalCommunicator::ReduceScatterAsync(const void* send, void* recv,
                                                            size_t recv_count, DataType type,
                                                            ReduceOp, const CollectiveOptions&) {
  return Copy(send, recv, recv_count * DataTypeSize(type));
}

std::unique_ptr<Work> LocalCommunicator::AllGatherAsync(const void* send, void* recv,
                                                        size_t send_count, DataType type,
                                                        const CollectiveOptions&) {
  return Copy(send, recv, send_count * DataTypeSize(type));
}

std::unique_ptr<Work> LocalCommunicator::BroadcastAsync(void*, size_t, DataType, int root,
                                                        const CollectiveOptions&) {
  if (root != 0) {
    return MakeDoneWork(absl::InvalidArgumentError(absl::StrCat("root ", root, " >= world size 1")));
  }
  return Copy(nullptr, nullptr, 0);
}

std::unique_ptr<Work> LocalCommunicator::BarrierAsync(const CollectiveOptions&) {
  return Copy(nullptr, nullptr, 0);
}

}  // namespace athanor
