#include "checkpoint/s3/s3_object_store.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "checkpoint/s3/s3_writable.h"
#include "checkpoint/s3/s3_listing.h"
#include "common/status.h"

namespace athanor {

S3ObjectStore::S3ObjectStore(S3Options options) : client_(std::move(options)) {}

std::string S3ObjectStore::Describe() const {
  const S3Options& o = client_.options();
  return absl::StrCat("s3://", o.bucket, o.prefix.empty() ? "" : "/", o.prefix, " (", o.endpoint, ")");
}

std::string S3ObjectStore::FullKey(const std::string& key) const {
  const std::string& prefix = client_.options().prefix;
  return prefix.empty() ? key : absl::StrCat(prefix, "/", key);
}

absl::StatusOr<std::unique_ptr<WritableObject>> S3ObjectStore::OpenWrite(const std::string& key,
                                                                         PutMode mode) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  return std::unique_ptr<WritableObject>(new S3Writable(this, key, mode));
}

absl::StatusOr<std::string> S3ObjectStore::Get(const std::string& key, uint64_t offset, int64_t length) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  S3Request req{"GET", FullKey(key), {}, {}, {}};
  if (length == 0) {
    // HTTP ranges cannot be empty: check bounds with HEAD.
    ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
    if (offset > info.size) return absl::OutOfRangeError(absl::StrCat(key, ": offset past the end"));
    return std::string();
  }
  if (offset > 0 || length > 0) {
    req.headers["range"] = length < 0 ? absl::StrCat("bytes=", offset, "-")
                                      : absl::StrCat("bytes=", offset, "-", offset + length - 1);
  }
  req.max_body = length > 0 ? static_cast<uint64_t>(length) : client_.options().max_object_bytes;
  ASSIGN_OR_RETURN(S3Response r, client_.Send(req));
  if (r.status == 416 && length < 0) {
    // "bytes=SIZE-" of a SIZE-byte object: an empty tail.
    ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
    if (offset == info.size) return std::string();
  }
  if (r.status != 200 && r.status != 206) return S3ErrorStatus(r, absl::StrCat("GET ", FullKey(key)));
  if (length > 0 && r.body.size() != static_cast<uint64_t>(length)) {
    if (r.body.size() < static_cast<uint64_t>(length) && r.status == 206) {
      return absl::OutOfRangeError(absl::StrCat("GET ", FullKey(key), ": range [", offset, ", ",
                                                offset + length, ") past the end"));
    }
    return absl::DataLossError(absl::StrCat("GET ", FullKey(key), " returned ", r.body.size(),
                                            " bytes, wanted ", length));
  }
  if (r.status == 200 && offset > 0) {
    // The server ignored Range; cut it ourselves.
    if (offset > r.body.size()) return absl::OutOfRangeError(absl::StrCat(key, ": offset past the end"));
    r.body.erase(0, offset);
    if (length >= 0) r.body.resize(static_cast<size_t>(length));
  }
  return std::move(r.body);
}

absl::StatusOr<ObjectInfo> S3ObjectStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  ASSIGN_OR_RETURN(S3Response r, client_.Send(S3Request{"HEAD", FullKey(key), {}, {}, {}}));
  if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("HEAD ", FullKey(key)));
  ObjectInfo info{key, 0, 0};
  if (!absl::SimpleAtoi(r.headers["content-length"], &info.size)) {
    return absl::InternalError(absl::StrCat("HEAD ", FullKey(key), ": no Content-Length"));
  }
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC1123_full, r.headers["last-modified"], &t, &err)) {
    info.mtime_unix = absl::ToUnixSeconds(t);
  }
  return info;
}

absl::StatusOr<std::vector<ObjectInfo>> S3ObjectStore::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string token;
  std::string full_prefix = FullKey(prefix);
  if (prefix.empty() && !client_.options().prefix.empty()) full_prefix = client_.options().prefix + "/";
  ListCursor cursor;
  do {
    S3Request req{"GET", "", {{"list-type", "2"}, {"prefix", full_prefix}}, {}, {}};
    if (!token.empty()) req.query["continuation-token"] = token;
    if (client_.options().list_page_size > 0) {
      req.query["max-keys"] = absl::StrCat(client_.options().list_page_size);
    }
    ASSIGN_OR_RETURN(S3Response r, client_.Send(req));
    if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("ListObjectsV2 ", full_prefix));
    absl::StatusOr<ObjectPage> page = ParseListObjectsPage(r.body, client_.options().prefix);
    if (!page.ok()) return Annotate(page.status(), Describe());
    for (ObjectInfo& info : page->objects) out.push_back(std::move(info));
    token = page->next_token;
    if (page->truncated) RETURN_IF_ERROR(Annotate(cursor.Advance(token), absl::StrCat("ListObjectsV2 ", full_prefix)));
  } while (!token.empty());
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

absl::Status S3ObjectStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  ASSIGN_OR_RETURN(S3Response r, client_.Send(S3Request{"DELETE", FullKey(key), {}, {}, {}}));
  if (r.status != 204 && r.status != 200 && r.status != 404) {
    return S3ErrorStatus(r, absl::StrCat("DELETE ", FullKey(key)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PendingUpload>> S3ObjectStore::ListPendingUploads(const std::string& prefix) {
  std::vector<PendingUpload> out;
  std::string key_marker, id_marker;
  std::string full_prefix = FullKey(prefix);
  ListCursor cursor;
  while (true) {
    S3Request req{"GET", "", {{"uploads", ""}, {"prefix", full_prefix}}, {}, {}};
    if (!key_marker.empty()) {
      req.query["key-marker"] = key_marker;
      req.query["upload-id-marker"] = id_marker;
    }
    ASSIGN_OR_RETURN(S3Response r, client_.Send(req));
    if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("ListMultipartUploads ", full_prefix));
    absl::StatusOr<UploadPage> page = ParseListUploadsPage(r.body, client_.options().prefix);
    if (!page.ok()) return Annotate(page.status(), Describe());
    for (PendingUpload& u : page->uploads) out.push_back(std::move(u));
    if (!page->truncated) break;
    key_marker = page->next_key_marker;
    id_marker = page->next_upload_id_marker;
    RETURN_IF_ERROR(Annotate(cursor.Advance(absl::StrCat(key_marker, "\n", id_marker)),
                             absl::StrCat("ListMultipartUploads ", full_prefix)));
  }
  return out;
}

absl::Status S3ObjectStore::AbortPendingUpload(const PendingUpload& upload) {
  ASSIGN_OR_RETURN(S3Response r, client_.Send(S3Request{"DELETE", FullKey(upload.key),
                                                        {{"uploadId", upload.upload_id}}, {}, {}}));
  if (r.status != 204 && r.status != 200 && r.status != 404) {
    return S3ErrorStatus(r, absl::StrCat("AbortMultipartUpload ", FullKey(upload.key)));
  }
  return absl::OkStatus();
}

void RegisterS3ObjectStore() {
  RegisterObjectStoreScheme("s3", [](const std::string& uri) -> absl::StatusOr<std::unique_ptr<ObjectStore>> {
    ASSIGN_OR_RETURN(S3Options options, ParseS3Options(uri, AwsEnvironment()));
    return std::unique_ptr<ObjectStore>(new S3ObjectStore(std::move(options)));
  });
}

}  // namespace athanor
