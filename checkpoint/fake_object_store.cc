#include "checkpoint/fake_object_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {

class FakeWritable final : public WritableObject {
 public:
  FakeWritable(FakeObjectStore* store, std::string key, PutMode mode, std::string upload_id)
      : store_(store), key_(std::move(key)), mode_(mode), upload_id_(std::move(upload_id)) {}
  ~FakeWritable() override { Abort(); }

  absl::Status Append(absl::string_view data) override {
    data_.append(data.data(), data.size());
    return absl::OkStatus();
  }
  absl::Status Close() override {
    done_ = true;
    return store_->Finish(upload_id_, key_, mode_, std::move(data_));
  }
  void Abort() override {
    if (done_) return;
    done_ = true;
    store_->DropUpload(upload_id_);
  }

 private:
  FakeObjectStore* store_;
  std::string key_;
  PutMode mode_;
  std::string upload_id_;
  std::string data_;
  bool done_ = false;
};

std::string FakeObjectStore::NewUploadId(const std::string& key) {
  absl::MutexLock lock(&mu_);
  std::string id = absl::StrCat("upload-", next_upload_++);
  pending_[id] = key;
  return id;
}

void FakeObjectStore::DropUpload(const std::string& upload_id) {
  absl::MutexLock lock(&mu_);
  pending_.erase(upload_id);
}

absl::StatusOr<std::unique_ptr<WritableObject>> FakeObjectStore::OpenWrite(const std::string& key,
                                                                           PutMode mode) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  return std::unique_ptr<WritableObject>(new FakeWritable(this, key, mode, NewUploadId(key)));
}

absl::Status FakeObjectStore::Finish(const std::string& upload_id, const std::string& key,
                                     PutMode mode, std::string data) {
  absl::MutexLock lock(&mu_);
  pending_.erase(upload_id);
  if (mode == PutMode::kCreateOnly && objects_.count(key)) {
    return absl::AlreadyExistsError(absl::StrCat("fake://", key, " already exists"));
  }
  objects_[key] = std::move(data);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeObjectStore::Get(const std::string& key, uint64_t offset,
                                                 int64_t length) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return absl::NotFoundError(absl::StrCat("fake://", key, " not found"));
  const std::string& data = it->second;
  uint64_t end = length < 0 ? data.size() : offset + static_cast<uint64_t>(length);
  if (offset > data.size() || end > data.size()) {
    return absl::OutOfRangeError(absl::StrCat("fake://", key, ": range [", offset, ", ", end,
                                              ") past size ", data.size()));
  }
  return data.substr(offset, end - offset);
}

absl::StatusOr<ObjectInfo> FakeObjectStore::Head(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return absl::NotFoundError(absl::StrCat("fake://", key, " not found"));
  return ObjectInfo{key, it->second.size(), 0};
}

absl::StatusOr<std::vector<ObjectInfo>> FakeObjectStore::List(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectInfo> out;
  for (auto it = objects_.lower_bound(prefix);
       it != objects_.end() && absl::StartsWith(it->first, prefix); ++it) {
    out.push_back(ObjectInfo{it->first, it->second.size(), 0});
  }
  return out;
}

absl::Status FakeObjectStore::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  objects_.erase(key);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PendingUpload>> FakeObjectStore::ListPendingUploads(
    const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  std::vector<PendingUpload> out;
  for (const auto& [id, key] : pending_) {
    if (absl::StartsWith(key, prefix)) out.push_back(PendingUpload{key, id});
  }
  return out;
}

absl::Status FakeObjectStore::AbortPendingUpload(const PendingUpload& upload) {
  DropUpload(upload.upload_id);
  return absl::OkStatus();
}

std::map<std::string, std::string> FakeObjectStore::Objects() const {
  absl::MutexLock lock(&mu_);
  return objects_;
}

bool FakeObjectStore::Corrupt(const std::string& key, uint64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || offset >= it->second.size()) return false;
  it->second[offset] = static_cast<char>(it->second[offset] ^ 0x5a);
  return true;
}

void FakeObjectStore::AddPendingUpload(const std::string& key) { NewUploadId(key); }

}  // namespace athanor
