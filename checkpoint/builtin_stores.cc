#include "checkpoint/builtin_stores.h"

#include <mutex>

#include "checkpoint/file/file_object_store.h"
#include "checkpoint/s3/s3_object_store.h"

namespace athanor {

void RegisterBuiltinObjectStores() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterFileObjectStore();
    RegisterS3ObjectStore();
  });
}

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStoreWithEnv(
    const std::string& uri, const std::map<std::string, std::string>& env) {
  RegisterBuiltinObjectStores();
  if (uri.rfind("s3://", 0) != 0) return OpenObjectStore(uri);
  absl::StatusOr<S3Options> options = ParseS3Options(uri, env);
  if (!options.ok()) return options.status();
  return std::unique_ptr<ObjectStore>(new S3ObjectStore(std::move(*options)));
}

}  // namespace athanor
