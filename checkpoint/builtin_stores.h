// Registers every object store backend built into athanor ("file", "s3")
// with OpenObjectStore. Programs call it once from main; idempotent and
// thread-safe. Link athanor_checkpoint_stores for it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/object_store.h"

namespace athanor {

void RegisterBuiltinObjectStores();

// Like OpenObjectStore, but an s3:// store takes its endpoint and credentials
// from `env` (AWS_* names) instead of this process's environment: how the
// node checkpoint service writes with each job's own credentials.
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStoreWithEnv(
    const std::string& uri, const std::map<std::string, std::string>& env);

}  // namespace athanor
