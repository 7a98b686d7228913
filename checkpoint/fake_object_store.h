// FakeObjectStore: an in-memory ObjectStore for unit tests.
//
// Thread-safe (one mutex). Create-only puts are atomic. Streaming writes are
// kept aside as pending uploads until Close(), so retention sweeps can be
// tested. Tests may poke at the contents directly (Corrupt, Objects).
#pragma once

#include <map>
#include <string>

#include "checkpoint/object_store.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

class FakeObjectStore final : public ObjectStore {
 public:
  FakeObjectStore() = default;

  std::string Describe() const override { return "fake://"; }
  StoreCapabilities Capabilities() const override { return {.atomic_create_only = true}; }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset,
                                  int64_t length) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix) override;
  absl::Status AbortPendingUpload(const PendingUpload& upload) override;

  // Test helpers.
  std::map<std::string, std::string> Objects() const;
  // Flips one byte of `key` at `offset`; false when out of range or missing.
  bool Corrupt(const std::string& key, uint64_t offset);
  // Leaves an unfinished upload behind, as a crashed writer would.
  void AddPendingUpload(const std::string& key);

 private:
  friend class FakeWritable;
  absl::Status Finish(const std::string& upload_id, const std::string& key, PutMode mode,
                      std::string data);
  std::string NewUploadId(const std::string& key);
  void DropUpload(const std::string& upload_id);

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> objects_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> pending_;        // upload id -> key; guarded by mu_
  int64_t next_upload_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace athanor
