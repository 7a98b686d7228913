// ThrottledStore: an ObjectStore decorator that caps the rate at which each
// streaming upload appends bytes (the service's --upload-mbps, which leaves
// the node's network to training). Reads and small calls pass through.
//
// Thread-safe as the wrapped store is; each WritableObject paces itself.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "checkpoint/forwarding_object_store.h"

namespace athanor::ckptsvc {

class ThrottledStore final : public ForwardingObjectStore {
 public:
  ThrottledStore(std::unique_ptr<ObjectStore> inner, uint64_t bytes_per_second)
      : ForwardingObjectStore(std::move(inner)), rate_(bytes_per_second) {}
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override;

 private:
  const uint64_t rate_;
};

}  // namespace athanor::ckptsvc
