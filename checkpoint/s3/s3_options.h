// S3Options: everything the s3:// backend needs, parsed once at the edge from
// the URI and the environment, then passed down.
//
//   s3://BUCKET/PREFIX?endpoint=http://127.0.0.1:9000&region=us-east-1
//       &access_key=..&secret_key=..&part_size=16777216&upload_threads=4
//       &max_attempts=8&retry_base_ms=50&conditional_put=false
//       &low_speed_seconds=10&sign_payload=true&list_page_size=1000&max_object_mb=65536
//
// Query parameters win over AWS_ENDPOINT_URL, AWS_REGION (or
// AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN. Without an endpoint, https://s3.REGION.amazonaws.com.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace athanor {

struct S3Options {
  std::string endpoint;  // scheme://host[:port], no trailing '/'
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  std::string bucket;
  std::string prefix;  // without leading or trailing '/'; may be empty
  size_t part_size = 16 << 20;  // multipart threshold and part size (>= 5 MiB on AWS)
  int upload_threads = 4;       // parts in flight per upload
  int max_attempts = 8;         // per request, including the first
  int retry_base_ms = 50;       // backoff: uniform in [0, min(max, base * 2^attempt)]
  int retry_max_ms = 5000;
  // The endpoint honours "If-None-Match: *" on PUT (AWS since 2024, MinIO).
  // When false, create-only puts are head-then-put, which is racy.
  bool conditional_put = false;
  int connect_timeout_ms = 5000;
  int low_speed_seconds = 10;   // a transfer below 1 byte/s this long is a timeout
  bool sign_payload = true;     // false: UNSIGNED-PAYLOAD
  int list_page_size = 0;       // ListObjectsV2 max-keys; 0: the server's default (1000)
  // The most bytes a whole-object GET may bring back (max_object_mb); a server
  // sending more, or announcing more, fails the request instead of filling memory.
  uint64_t max_object_bytes = uint64_t{64} << 30;
};

// InvalidArgument naming the bad parameter.
absl::StatusOr<S3Options> ParseS3Options(const std::string& uri,
                                         const std::map<std::string, std::string>& env);

// The AWS_* variables of this process, for ParseS3Options (call at the edge).
std::map<std::string, std::string> AwsEnvironment();

}  // namespace athanor
