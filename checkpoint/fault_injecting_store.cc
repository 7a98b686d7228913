#include "checkpoint/fault_injecting_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {
namespace {

class FailingWritable final : public WritableObject {
 public:
  explicit FailingWritable(std::string key) : key_(std::move(key)) {}
  absl::Status Append(absl::string_view) override { return absl::OkStatus(); }
  absl::Status Close() override {
    return absl::UnavailableError(absl::StrCat("injected fault: put of ", key_, " failed"));
  }
  void Abort() override {}

 private:
  std::string key_;
};

// Buffers the object, flips its middle byte, then writes it through.
class CorruptingWritable final : public WritableObject {
 public:
  explicit CorruptingWritable(std::unique_ptr<WritableObject> base) : base_(std::move(base)) {}
  absl::Status Append(absl::string_view data) override {
    data_.append(data.data(), data.size());
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (!data_.empty()) data_[data_.size() / 2] ^= 0x01;
    absl::Status status = base_->Append(data_);
    if (!status.ok()) {
      base_->Abort();
      return status;
    }
    return base_->Close();
  }
  void Abort() override { base_->Abort(); }

 private:
  std::unique_ptr<WritableObject> base_;
  std::string data_;
};

}  // namespace

void FaultInjectingStore::FailNthPut(int n, std::string key_substring) {
  absl::MutexLock lock(&mu_);
  fail_nth_ = n;
  fail_nth_match_ = std::move(key_substring);
  matching_puts_ = 0;
}

void FaultInjectingStore::FailAllPuts(std::string key_substring) {
  absl::MutexLock lock(&mu_);
  fail_all_match_ = std::move(key_substring);
}

void FaultInjectingStore::CorruptPuts(std::string key_substring) {
  absl::MutexLock lock(&mu_);
  corrupt_match_ = std::move(key_substring);
}

int FaultInjectingStore::puts_failed() const {
  absl::MutexLock lock(&mu_);
  return puts_failed_;
}

absl::StatusOr<std::unique_ptr<WritableObject>> FaultInjectingStore::OpenWrite(
    const std::string& key, PutMode mode) {
  bool fail = false;
  bool corrupt = false;
  {
    absl::MutexLock lock(&mu_);
    if (fail_nth_ > 0 && absl::StrContains(key, fail_nth_match_) && ++matching_puts_ == fail_nth_) {
      fail = true;
    }
    if (!fail_all_match_.empty() && absl::StrContains(key, fail_all_match_)) fail = true;
    if (!corrupt_match_.empty() && absl::StrContains(key, corrupt_match_)) corrupt = true;
    if (fail) ++puts_failed_;
  }
  if (fail) return std::unique_ptr<WritableObject>(new FailingWritable(key));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableObject> base, inner()->OpenWrite(key, mode));
  if (corrupt) return std::unique_ptr<WritableObject>(new CorruptingWritable(std::move(base)));
  return base;
}

}  // namespace athanor
