// AllReduceOnlyCommunicator: the base of the trainer's test fakes, which only
// implement AllReduceAsync. Every other collective returns a Work that fails
// with Unimplemented naming the call, so a test that reaches one fails with a
// clear message. Stateless; thread-safety is the subclass's.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "collectives/communicator.h"

namespace athanor {

class AllReduceOnlyCommunicator : public Communicator {
 public:
  std::unique_ptr<Work> ReduceScatterAsync(const void*, void*, size_t, DataType, ReduceOp,
                                           const CollectiveOptions&) override {
    return Unsupported("ReduceScatter");
  }
  std::unique_ptr<Work> AllGatherAsync(const void*, void*, size_t, DataType,
                                       const CollectiveOptions&) override {
    return Unsupported("AllGather");
  }
  std::unique_ptr<Work> BroadcastAsync(void*, size_t, DataType, int,
                                       const CollectiveOptions&) override {
    return Unsupported("Broadcast");
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions&) override {
    return Unsupported("Barrier");
  }
  void Abort() override {}

 private:
  class FailedWork final : public Work {
   public:
    explicit FailedWork(absl::Status status) : status_(std::move(status)) {}
    absl::Status Wait(std::chrono::milliseconds) override { return status_; }
    bool Done() override { return true; }

   private:
    const absl::Status status_;
  };

  std::unique_ptr<Work> Unsupported(const char* what) const {
    return std::make_unique<FailedWork>(
        absl::UnimplementedError(absl::StrCat(what, " is not supported by the ", backend(), " test communicator")));
  }
};

}  // namespace athanor
