#include "checkpoint/object_store.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/uri.h"

namespace athanor {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, ObjectStoreFactory> factories ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

absl::Status ObjectStore::Put(const std::string& key, absl::string_view data, PutMode mode) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableObject> out, OpenWrite(key, mode));
  absl::Status status = out->Append(data);
  if (!status.ok()) {
    out->Abort();
    return status;
  }
  return out->Close();
}

absl::Status ObjectStore::GetInto(const std::string& key, uint64_t offset, uint64_t length, char* dst) {
  ASSIGN_OR_RETURN(std::string bytes, Get(key, offset, static_cast<int64_t>(length)));
  if (bytes.size() != length) {
    return absl::DataLossError(absl::StrCat(Describe(), "/", key, ": got ", bytes.size(), " bytes, wanted ", length));
  }
  std::memcpy(dst, bytes.data(), length);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PendingUpload>> ObjectStore::ListPendingUploads(const std::string&) {
  return std::vector<PendingUpload>();
}

absl::Status ObjectStore::AbortPendingUpload(const PendingUpload& upload) {
  return absl::UnimplementedError(
      absl::StrCat(Describe(), " has no pending uploads to abort (", upload.key, ")"));
}

void RegisterObjectStoreScheme(const std::string& scheme, ObjectStoreFactory factory) {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mu);
  registry.factories[scheme] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& uri) {
  ASSIGN_OR_RETURN(Uri parsed, ParseUri(uri));
  ObjectStoreFactory factory;
  {
    Registry& registry = GetRegistry();
    absl::MutexLock lock(&registry.mu);
    auto it = registry.factories.find(parsed.scheme);
    if (it == registry.factories.end()) {
      return absl::UnimplementedError(absl::StrCat(
          "no object store registered for scheme '", parsed.scheme, "' (URI ", uri, ")"));
    }
    factory = it->second;
  }
  return factory(uri);
}

absl::Status ValidateObjectKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("empty object key");
  if (key.front() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("object key '", key, "' starts with '/'"));
  }
  if (key.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("object key contains a NUL byte");
  }
  for (absl::string_view part : absl::StrSplit(key, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("object key '", key, "' has an empty, '.' or '..' segment"));
    }
  }
  return absl::OkStatus();
}

}  // namespace athanor
