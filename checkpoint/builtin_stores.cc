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

}  // namespace athanor
