// The streaming upload of S3ObjectStore: one PUT for small objects, a
// multipart upload with parallel parts for large ones. See s3_object_store.h.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/object_store.h"
#include "checkpoint/s3/s3_client.h"

namespace athanor {

class S3ObjectStore;

class S3Writable final : public WritableObject {
 public:
  // `store` is not owned and must outlive this object.
  S3Writable(S3ObjectStore* store, std::string key, PutMode mode);
  ~S3Writable() override;

  absl::Status Append(absl::string_view data) override;
  absl::Status Close() override;
  void Abort() override;

 private:
  struct Part {
    int number = 0;
    std::string data;
    std::string etag;
  };
  absl::Status StartPart();          // hands buffer_ to an upload thread
  absl::Status WaitOldestPart();
  absl::Status WaitAllParts();
  absl::Status CheckCreateOnly();
  absl::Status PutSingle();
  absl::Status Complete();

  S3ObjectStore* const store_;
  const std::string key_;        // store key
  const std::string full_key_;   // bucket key
  const PutMode mode_;
  std::string buffer_;
  std::string upload_id_;        // empty until the multipart upload starts
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<std::future<absl::Status>> in_flight_;  // oldest first
  size_t next_to_wait_ = 0;
  uint64_t total_bytes_ = 0;     // bytes handed to parts so far
  absl::Status first_error_;
  bool done_ = false;
};

}  // namespace athanor
