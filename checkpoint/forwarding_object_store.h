// ForwardingObjectStore: an ObjectStore that passes every call to a wrapped
// store, the base of decorators that change one or two calls (throttling,
// fault and crash injection, test gates) and inherit the rest.
//
// Put is not forwarded: it keeps ObjectStore's default, which streams through
// this store's OpenWrite, so a decorator that intercepts OpenWrite sees
// whole-object puts too. Everything else goes to the wrapped store as is.
//
// Thread-safe as the wrapped store is. The raw-pointer constructor does not
// own the wrapped store, which must outlive this one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/object_store.h"

namespace athanor {

class ForwardingObjectStore : public ObjectStore {
 public:
  explicit ForwardingObjectStore(ObjectStore* inner) : inner_(inner) {}
  explicit ForwardingObjectStore(std::unique_ptr<ObjectStore> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}

  std::string Describe() const override { return inner_->Describe(); }
  StoreCapabilities Capabilities() const override { return inner_->Capabilities(); }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override {
    return inner_->OpenWrite(key, mode);
  }
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

 protected:
  ObjectStore* inner() const { return inner_; }

 private:
  std::unique_ptr<ObjectStore> owned_;
  ObjectStore* const inner_;
};

}  // namespace athanor
