#include "checkpoint/s3/s3_writable.h"

#include "absl/strings/str_cat.h"
#include "checkpoint/s3/s3_object_store.h"
#include "checkpoint/s3/xml.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {

S3Writable::S3Writable(S3ObjectStore* store, std::string key, PutMode mode)
    : store_(store), key_(std::move(key)), full_key_(store->FullKey(key_)), mode_(mode) {}

S3Writable::~S3Writable() { Abort(); }

absl::Status S3Writable::Append(absl::string_view data) {
  const size_t part_size = store_->client()->options().part_size;
  while (!data.empty()) {
    size_t take = std::min(data.size(), part_size - buffer_.size());
    if (buffer_.capacity() < part_size) buffer_.reserve(part_size);
    buffer_.append(data.data(), take);
    data.remove_prefix(take);
    if (buffer_.size() == part_size) RETURN_IF_ERROR(StartPart());
  }
  return absl::OkStatus();
}

absl::Status S3Writable::StartPart() {
  S3Client* client = store_->client();
  if (upload_id_.empty()) {
    ASSIGN_OR_RETURN(S3Response r, client->Send(S3Request{"POST", full_key_, {{"uploads", ""}}, {}, {}}));
    if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("initiating multipart upload of ", full_key_));
    upload_id_ = xml::FindText(r.body, "UploadId");
    if (upload_id_.empty()) return absl::InternalError(absl::StrCat("no UploadId for ", full_key_));
  }
  while (in_flight_.size() - next_to_wait_ >= static_cast<size_t>(client->options().upload_threads)) {
    RETURN_IF_ERROR(WaitOldestPart());
  }
  auto part = std::make_unique<Part>();
  part->number = static_cast<int>(parts_.size()) + 1;
  part->data.swap(buffer_);
  total_bytes_ += part->data.size();
  Part* p = part.get();
  parts_.push_back(std::move(part));
  std::string full_key = full_key_;
  std::string upload_id = upload_id_;
  in_flight_.push_back(std::async(std::launch::async, [client, p, full_key, upload_id]() -> absl::Status {
    S3Request req{"PUT", full_key, {{"partNumber", absl::StrCat(p->number)}, {"uploadId", upload_id}}, {}, p->data};
    ASSIGN_OR_RETURN(S3Response r, client->Send(req));
    if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("uploading part ", p->number, " of ", full_key));
    p->etag = r.headers["etag"];
    p->data.clear();
    p->data.shrink_to_fit();
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

absl::Status S3Writable::WaitOldestPart() {
  absl::Status status = in_flight_[next_to_wait_++].get();
  if (!status.ok() && first_error_.ok()) first_error_ = status;
  return status;
}

absl::Status S3Writable::WaitAllParts() {
  while (next_to_wait_ < in_flight_.size()) WaitOldestPart().IgnoreError();
  return first_error_;
}

absl::Status S3Writable::CheckCreateOnly() {
  if (mode_ != PutMode::kCreateOnly || store_->client()->options().conditional_put) return absl::OkStatus();
  absl::StatusOr<ObjectInfo> head = store_->Head(key_);  // racy emulation: see the header
  if (head.ok()) return absl::AlreadyExistsError(absl::StrCat("s3 object ", full_key_, " already exists"));
  if (!absl::IsNotFound(head.status())) return head.status();
  return absl::OkStatus();
}

absl::Status S3Writable::PutSingle() {
  RETURN_IF_ERROR(CheckCreateOnly());
  S3Request req{"PUT", full_key_, {}, {}, buffer_};
  if (mode_ == PutMode::kCreateOnly) req.headers.emplace("if-none-match", std::string("*"));
  ASSIGN_OR_RETURN(S3Response r, store_->client()->Send(req));
  if (r.status != 200) return S3ErrorStatus(r, absl::StrCat("PUT ", full_key_));
  return absl::OkStatus();
}

absl::Status S3Writable::Complete() {
  std::string body = "<CompleteMultipartUpload>";
  for (const auto& part : parts_) {
    absl::StrAppend(&body, "<Part><PartNumber>", part->number, "</PartNumber><ETag>",
                    xml::Escape(part->etag), "</ETag></Part>");
  }
  body += "</CompleteMultipartUpload>";
  RETURN_IF_ERROR(CheckCreateOnly());
  S3Request req{"POST", full_key_, {{"uploadId", upload_id_}}, {}, body};
  if (mode_ == PutMode::kCreateOnly) req.headers.emplace("if-none-match", std::string("*"));
  // Complete is not idempotent: when a response is lost, the retry finds the
  // upload gone (NoSuchUpload, or HTTP 500 from some servers) although the
  // object was assembled. The object existing with exactly our size settles it
  // (CheckCreateOnly saw no object before; manifests' CRC32C catch the rest).
  auto assembled = [this] {
    absl::StatusOr<ObjectInfo> head = store_->Head(key_);
    return head.ok() && head->size == total_bytes_;
  };
  req.already_applied = assembled;
  ASSIGN_OR_RETURN(S3Response r, store_->client()->Send(req));
  if (r.status == 404 && xml::FindText(r.body, "Code") == "NoSuchUpload" && assembled()) {
    return absl::OkStatus();
  }
  if (r.status != 200 || r.body.find("<Error>") != std::string::npos) {
    return S3ErrorStatus(r, absl::StrCat("completing multipart upload of ", full_key_));
  }
  return absl::OkStatus();
}

absl::Status S3Writable::Close() {
  done_ = true;
  absl::Status status;
  if (upload_id_.empty()) {
    status = PutSingle();
  } else {
    if (!buffer_.empty()) status = StartPart();
    absl::Status parts = WaitAllParts();
    if (status.ok()) status = parts;
    if (status.ok()) status = Complete();
    if (!status.ok()) {
      store_->AbortPendingUpload(PendingUpload{key_, upload_id_}).IgnoreError();
    }
  }
  buffer_.clear();
  return status;
}

void S3Writable::Abort() {
  if (done_) return;
  done_ = true;
  WaitAllParts().IgnoreError();
  if (!upload_id_.empty()) {
    absl::Status s = store_->AbortPendingUpload(PendingUpload{key_, upload_id_});
    if (!s.ok()) ATHANOR_LOG(WARNING) << "abort of " << full_key_ << " failed: " << s.ToString();
  }
}

}  // namespace athanor
