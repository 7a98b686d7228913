// Pages of S3 listings (ListObjectsV2, ListMultipartUploads), decoded apart
// from any HTTP so that they can be tested and fuzzed on bytes alone.
//
// A page is trusted only as far as it is consistent: every key must lie under
// the store's prefix, sizes must be integers, and a truncated page must name
// where the next one starts. ListCursor refuses a continuation that was seen
// before (a server that loops would otherwise page forever) and caps the
// number of pages. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/object_store.h"

namespace athanor {

// The store key for a key listed in the bucket: `full_key` without
// "<prefix>/" (empty for "<prefix>/" itself, which listings skip). DataLoss
// when it does not start with that (a server answering with keys outside
// the requested prefix).
absl::StatusOr<std::string> StripStorePrefix(absl::string_view prefix, absl::string_view full_key);

struct ObjectPage {
  std::vector<ObjectInfo> objects;  // keys relative to the store prefix
  bool truncated = false;
  std::string next_token;  // set when truncated
};

struct UploadPage {
  std::vector<PendingUpload> uploads;
  bool truncated = false;
  std::string next_key_marker, next_upload_id_marker;  // set when truncated
};

// DataLoss naming the problem for malformed XML, a bad Size, a key outside
// `prefix`, or a truncated page without a continuation.
absl::StatusOr<ObjectPage> ParseListObjectsPage(absl::string_view body, absl::string_view prefix);
absl::StatusOr<UploadPage> ParseListUploadsPage(absl::string_view body, absl::string_view prefix);

// Follows continuation tokens for one listing.
class ListCursor {
 public:
  static constexpr int kMaxPages = 1 << 20;
  // Accepts the continuation of the page just read; DataLoss when it was seen
  // before in this listing or the listing has run past kMaxPages.
  absl::Status Advance(const std::string& continuation);

 private:
  std::set<std::string> seen_;
  int pages_ = 0;
};

}  // namespace athanor
