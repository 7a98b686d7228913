// FileObjectStore: the file:// backend (the embedded default).
//
// Keys map to files below a root directory. A put writes a hidden temporary
// ".NAME.athanor-tmp-XXXXXX" beside the target, fsyncs it, then rename()s it
// into place (kOverwrite) or link()s it (kCreateOnly: atomic, EEXIST ->
// AlreadyExists), and fsyncs the directory. Readers therefore never see a
// partial object, and a crash leaves at most a temporary, which
// ListPendingUploads reports so retention can sweep it. Writeback of large
// objects starts every 8 MiB (sync_file_range) so the final fsync is short.
//
// Thread-safe: no shared mutable state beyond the file system. Deleting the
// last object of a directory removes the emptied directories up to the root.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/object_store.h"

namespace athanor {

class FileObjectStore final : public ObjectStore {
 public:
  // `root` is created if missing.
  static absl::StatusOr<std::unique_ptr<FileObjectStore>> Open(const std::string& root);

  std::string Describe() const override { return "file://" + root_; }
  StoreCapabilities Capabilities() const override { return {.atomic_create_only = true}; }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset,
                                  int64_t length) override;
  absl::Status GetInto(const std::string& key, uint64_t offset, uint64_t length, char* dst) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix) override;
  absl::Status AbortPendingUpload(const PendingUpload& upload) override;

 private:
  explicit FileObjectStore(std::string root) : root_(std::move(root)) {}
  // Walks the tree; calls `visit(key, is_temporary)` for every regular file.
  absl::Status Walk(const std::string& prefix,
                    const std::function<void(const std::string&, bool)>& visit) const;

  const std::string root_;  // absolute, without a trailing '/'
};

// Registers the "file" scheme with OpenObjectStore.
void RegisterFileObjectStore();

}  // namespace athanor
