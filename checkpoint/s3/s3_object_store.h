// S3ObjectStore: the s3://BUCKET/PREFIX backend (AWS, MinIO, Ceph RGW,
// s3rver...). Keys live under PREFIX in BUCKET, path-style addressing.
//
// Streaming puts buffer up to part_size; a larger object becomes a multipart
// upload whose parts go out in parallel (at most upload_threads in flight,
// which also bounds memory to (upload_threads + 1) * part_size). Every part
// is a buffer, so retries re-send it. Create-only puts send If-None-Match: *
// when S3Options::conditional_put says the endpoint honours it; otherwise
// they check with HEAD first, which is racy (documented on Capabilities()).
//
// Thread-safe. A WritableObject is used by one thread; its parts upload on
// threads it owns and joins before Close/Abort return.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/object_store.h"
#include "checkpoint/s3/s3_client.h"
#include "checkpoint/s3/s3_options.h"

namespace athanor {

class S3ObjectStore final : public ObjectStore {
 public:
  explicit S3ObjectStore(S3Options options);

  std::string Describe() const override;
  StoreCapabilities Capabilities() const override {
    return {.atomic_create_only = client_.options().conditional_put};
  }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t offset,
                                  int64_t length) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  // NotImplemented servers (s3rver) surface as Unimplemented.
  absl::StatusOr<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix) override;
  absl::Status AbortPendingUpload(const PendingUpload& upload) override;

  S3Client* client() { return &client_; }
  // Full key in the bucket for a store key.
  std::string FullKey(const std::string& key) const;

 private:
  S3Client client_;
};

// Registers the "s3" scheme with OpenObjectStore (options from the URI and
// this process's AWS_* environment).
void RegisterS3ObjectStore();

}  // namespace athanor
