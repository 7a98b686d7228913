// S3Client: signed S3 REST requests over libcurl, with retries.
//
// Send() signs (SigV4, path-style: endpoint/bucket/key) and performs one
// request, retrying with full-jitter exponential backoff on transport errors
// (connection refused/reset, timeouts, truncated bodies), HTTP 500/502/503/504
// and 400 RequestTimeout. Bodies are string_views the caller keeps alive, so
// every attempt re-sends the same bytes. Non-retryable HTTP errors come back
// as a response; ToStatus() maps them to canonical codes.
//
// Thread-safe: curl easy handles are pooled (one per concurrent request) so
// connections are reused.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/s3/s3_options.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

struct S3Request {
  std::string method;  // GET PUT POST DELETE HEAD
  std::string key;     // full object key (with the store prefix); empty for bucket requests
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // extra headers (signed)
  absl::string_view body;
  // For requests that are not idempotent (CompleteMultipartUpload): asked after
  // a failed attempt whose effect may still have happened (a lost response).
  // When it returns true, Send stops retrying and answers 200 with an empty body.
  std::function<bool()> already_applied;
  // The most body bytes the response may bring (0: kMaxMetadataBody, for
  // listings, errors and multipart answers). A response announcing or
  // sending more fails, not retried.
  uint64_t max_body = 0;
};

// The bound on a response body when a request sets none.
inline constexpr uint64_t kMaxMetadataBody = uint64_t{64} << 20;

struct S3Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class S3Client {
 public:
  explicit S3Client(S3Options options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // A response with any HTTP status that is not retryable, or Unavailable /
  // DeadlineExceeded once the attempts are spent.
  absl::StatusOr<S3Response> Send(const S3Request& request);

  const S3Options& options() const { return options_; }
  int64_t retries() const;

 private:
  absl::StatusOr<S3Response> SendOnce(const S3Request& request, void* curl, bool* retryable);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);

  const S3Options options_;
  std::string host_;  // Host header value
  mutable absl::Mutex mu_;
  std::vector<void*> idle_handles_ ABSL_GUARDED_BY(mu_);
  int64_t retries_ ABSL_GUARDED_BY(mu_) = 0;
};

// Maps a non-2xx response to a status: 404 NotFound, 412 AlreadyExists (a
// failed If-None-Match), 403 PermissionDenied, 416 OutOfRange, 501
// Unimplemented, others Internal; the message names `what`, the HTTP status
// and the S3 error code and message.
absl::Status S3ErrorStatus(const S3Response& response, const std::string& what);

// How many bytes to reserve for a body whose Content-Length header says
// `content_length`: the server's word is a hint, never an allocation size, so
// it is capped (larger bodies grow as they arrive); 0 when it is not a number.
constexpr size_t kMaxBodyReserve = size_t{8} << 20;
size_t BodyReserveHint(absl::string_view content_length);

}  // namespace athanor
