// Registers every object store backend built into athanor ("file", "s3")
// with OpenObjectStore. Programs call it once from main; idempotent and
// thread-safe. Link athanor_checkpoint_stores for it.
#pragma once

namespace athanor {

void RegisterBuiltinObjectStores();

}  // namespace athanor
