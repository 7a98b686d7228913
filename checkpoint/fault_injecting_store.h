// FaultInjectingStore: an ObjectStore decorator that breaks writes on purpose,
// so tests reach the error paths of the checkpoint code without flags inside
// any backend.
//
//   FaultInjectingStore faulty(&fake);
//   faulty.FailNthPut(2, "rank-00001");   // the 2nd put whose key contains it
//   faulty.CorruptPuts(".safetensors");   // flip a byte in matching objects
//
// Thread-safe. The raw-pointer constructor does not own the wrapped store,
// which must outlive the decorator. Puts are
// counted when they are opened; a failed put returns Unavailable and leaves
// nothing visible. Reads, lists and deletes pass straight through.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/forwarding_object_store.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

class FaultInjectingStore final : public ForwardingObjectStore {
 public:
  explicit FaultInjectingStore(ObjectStore* base) : ForwardingObjectStore(base) {}
  // Owning form, for factories.
  explicit FaultInjectingStore(std::unique_ptr<ObjectStore> base)
      : ForwardingObjectStore(std::move(base)) {}

  // Fails the `n`th (1-based) put whose key contains `key_substring`.
  void FailNthPut(int n, std::string key_substring);
  // Fails every put whose key contains `key_substring` (empty: none).
  void FailAllPuts(std::string key_substring);
  // Flips the middle byte of every object whose key contains `key_substring`.
  void CorruptPuts(std::string key_substring);
  int puts_failed() const;

  std::string Describe() const override { return "faulty+" + inner()->Describe(); }
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;

 private:
  mutable absl::Mutex mu_;
  int fail_nth_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_nth_match_ ABSL_GUARDED_BY(mu_);
  int matching_puts_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_all_match_ ABSL_GUARDED_BY(mu_);
  std::string corrupt_match_ ABSL_GUARDED_BY(mu_);
  int puts_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace athanor
