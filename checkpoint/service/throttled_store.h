// ThrottledStore: an ObjectStore decorator that caps the rate at which each
// streaming upload appends bytes (the service's --upload-mbps, which leaves
// the node's network to training). Reads and small calls pass through.
//
// Thread-safe as the wrapped store is; each WritableObject paces itself.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "checkpoint/object_store.h"

namespace athanor::ckptsvc {

class ThrottledStore final : public ObjectStore {
 public:
  ThrottledStore(std::unique_ptr<ObjectStore> inner, uint64_t bytes_per_second)
      : inner_(std::move(inner)), rate_(bytes_per_second) {}
  std::string Describe() const override { return inner_->Describe(); }
  StoreCapabilities Capabilities() const override { return inner_->Capabilities(); }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset,
                                  int64_t length) override {
    return inner_->Get(key, offset, length);
  }
  absl::Status GetInto(const std::string& key, uint64_t offset, uint64_t length,
                       char* dst) override {
    return inner_->GetInto(key, offset, length, dst);
  }
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override { return inner_->Head(key); }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return inner_->Delete(key); }
  absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(
      const std::string& prefix) override {
    return inner_->ListPendingUploads(prefix);
  }
  absl::Status AbortPendingUpload(const PendingUpload& upload) override {
    return inner_->AbortPendingUpload(upload);
  }

 private:
  std::unique_ptr<ObjectStore> inner_;
  const uint64_t rate_;
};

}  // namespace athanor::ckptsvc
