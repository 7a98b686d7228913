#include "checkpoint/service/throttled_store.h"

namespace athanor::ckptsvc {
namespace {

class ThrottledWritable final : public WritableObject {
 public:
  ThrottledWritable(std::unique_ptr<WritableObject> inner, uint64_t rate)
      : inner_(std::move(inner)), rate_(rate), start_(std::chrono::steady_clock::now()) {}
  absl::Status Append(absl::string_view data) override {
    sent_ += data.size();
    // Pace: the bytes sent so far may not leave before sent_/rate_ seconds.
    auto due = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(static_cast<double>(sent_) / rate_));
    std::this_thread::sleep_until(due);
    return inner_->Append(data);
  }
  absl::Status Close() override { return inner_->Close(); }
  void Abort() override { inner_->Abort(); }

 private:
  std::unique_ptr<WritableObject> inner_;
  const uint64_t rate_;
  const std::chrono::steady_clock::time_point start_;
  uint64_t sent_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WritableObject>> ThrottledStore::OpenWrite(const std::string& key,
                                                                          PutMode mode) {
  absl::StatusOr<std::unique_ptr<WritableObject>> w = inner()->OpenWrite(key, mode);
  if (!w.ok()) return w.status();
  return std::unique_ptr<WritableObject>(new ThrottledWritable(std::move(*w), rate_));
}

}  // namespace athanor::ckptsvc
