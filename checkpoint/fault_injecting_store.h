// FaultInjectingStore: an ObjectStore decorator that breaks writes on purpose,
// so tests reach the error paths of the checkpoint code without flags inside
// any backend.
//
//   FaultInjectingStore faulty(&fake);
//   faulty.FailNthPut(2, "rank-00001");   // the 2nd put whose key contains it
//   faulty.CorruptPuts(".safetensors");   // flip a byte in matching objects
//
// Thread-safe. The raw-pointer constructor does not own the wrapped store,
// which must outlive the decorator. Puts are
// counted when they are opened; a failed put returns Unavailable and leaves
// nothing visible. Reads, lists and deletes pass straight through.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/object_store.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

class FaultInjectingStore final : public ObjectStore {
 public:
  explicit FaultInjectingStore(ObjectStore* base) : base_(base) {}
  // Owning form, for factories.
  explicit FaultInjectingStore(std::unique_ptr<ObjectStore> base)
      : owned_(std::move(base)), base_(owned_.get()) {}

  // Fails the `n`th (1-based) put whose key contains `key_substring`.
  void FailNthPut(int n, std::string key_substring);
  // Fails every put whose key contains `key_substring` (empty: none).
  void FailAllPuts(std::string key_substring);
  // Flips the middle byte of every object whose key contains `key_substring`.
  void CorruptPuts(std::string key_substring);
  int puts_failed() const;

  std::string Describe() const override { return "faulty+" + base_->Describe(); }
  StoreCapabilities Capabilities() const override { return base_->Capabilities(); }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset,
                                  int64_t length) override {
    return base_->Get(key, offset, length);
  }
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override { return base_->Head(key); }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return base_->List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return base_->Delete(key); }
  absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(
      const std::string& prefix) override {
    return base_->ListPendingUploads(prefix);
  }
  absl::Status AbortPendingUpload(const PendingUpload& upload) override {
    return base_->AbortPendingUpload(upload);
  }

 private:
  std::unique_ptr<ObjectStore> owned_;
  ObjectStore* const base_;
  mutable absl::Mutex mu_;
  int fail_nth_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_nth_match_ ABSL_GUARDED_BY(mu_);
  int matching_puts_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_all_match_ ABSL_GUARDED_BY(mu_);
  std::string corrupt_match_ ABSL_GUARDED_BY(mu_);
  int puts_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace athanor
