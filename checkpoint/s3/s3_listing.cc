#include "checkpoint/s3/s3_listing.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "checkpoint/s3/xml.h"
#include "common/status.h"

namespace athanor {
namespace {

int64_t ParseLastModified(const std::string& text) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", text, &t, &err)) return absl::ToUnixSeconds(t);
  return 0;
}

absl::StatusOr<xml::Element> ParseRoot(absl::string_view body, absl::string_view what,
                                       absl::string_view root_name) {
  absl::StatusOr<xml::Element> root = xml::Parse(body);
  if (!root.ok()) return absl::DataLossError(absl::StrCat(what, ": ", root.status().message()));
  if (root->name != root_name) {
    return absl::DataLossError(absl::StrCat(what, ": the response is <", root->name.substr(0, 64),
                                            ">, not <", root_name, ">"));
  }
  return root;
}

}  // namespace

absl::StatusOr<std::string> StripStorePrefix(absl::string_view prefix, absl::string_view full_key) {
  if (prefix.empty()) return std::string(full_key);
  if (full_key.size() < prefix.size() + 1 || !absl::StartsWith(full_key, prefix) ||
      full_key[prefix.size()] != '/') {
    return absl::DataLossError(absl::StrCat("listed key '", full_key.substr(0, 256),
                                            "' is not under the prefix '", prefix, "/'"));
  }
  return std::string(full_key.substr(prefix.size() + 1));
}

absl::StatusOr<ObjectPage> ParseListObjectsPage(absl::string_view body, absl::string_view prefix) {
  ASSIGN_OR_RETURN(xml::Element root, ParseRoot(body, "ListObjectsV2", "ListBucketResult"));
  ObjectPage page;
  for (const xml::Element* contents : root.Children("Contents")) {
    ObjectInfo info;
    ASSIGN_OR_RETURN(info.key, StripStorePrefix(prefix, contents->ChildText("Key")));
    if (info.key.empty()) continue;  // "<prefix>/" itself: a folder marker some consoles create
    if (!absl::SimpleAtoi(contents->ChildText("Size"), &info.size)) {
      return absl::DataLossError(absl::StrCat("ListObjectsV2: key '", info.key, "' has a bad Size '",
                                              contents->ChildText("Size").substr(0, 32), "'"));
    }
    info.mtime_unix = ParseLastModified(contents->ChildText("LastModified"));
    page.objects.push_back(std::move(info));
  }
  page.truncated = root.ChildText("IsTruncated") == "true";
  if (page.truncated) {
    page.next_token = root.ChildText("NextContinuationToken");
    if (page.next_token.empty()) {
      return absl::DataLossError("ListObjectsV2: a truncated page without NextContinuationToken");
    }
  }
  return page;
}

absl::StatusOr<UploadPage> ParseListUploadsPage(absl::string_view body, absl::string_view prefix) {
  ASSIGN_OR_RETURN(xml::Element root, ParseRoot(body, "ListMultipartUploads", "ListMultipartUploadsResult"));
  UploadPage page;
  for (const xml::Element* upload : root.Children("Upload")) {
    PendingUpload u;
    ASSIGN_OR_RETURN(u.key, StripStorePrefix(prefix, upload->ChildText("Key")));
    u.upload_id = upload->ChildText("UploadId");
    if (u.upload_id.empty()) {
      return absl::DataLossError(absl::StrCat("ListMultipartUploads: '", u.key, "' has no UploadId"));
    }
    page.uploads.push_back(std::move(u));
  }
  page.truncated = root.ChildText("IsTruncated") == "true";
  if (page.truncated) {
    page.next_key_marker = root.ChildText("NextKeyMarker");
    page.next_upload_id_marker = root.ChildText("NextUploadIdMarker");
    if (page.next_key_marker.empty()) {
      return absl::DataLossError("ListMultipartUploads: a truncated page without NextKeyMarker");
    }
  }
  return page;
}

absl::Status ListCursor::Advance(const std::string& continuation) {
  if (++pages_ > kMaxPages) {
    return absl::DataLossError(absl::StrCat("listing ran past ", kMaxPages, " pages"));
  }
  if (!seen_.insert(continuation).second) {
    return absl::DataLossError(absl::StrCat("the server repeated the continuation '",
                                            continuation.substr(0, 128), "': it would list forever"));
  }
  return absl::OkStatus();
}

}  // namespace athanor
