// ShmSegments: the shared-memory segments of one host's members of a
// ShmAllReduce, mapped everywhere.
//
// Each member owns a segment that UCX allocates in shared memory (ucp_mem_map
// with UCP_MEM_MAP_ALLOCATE) and maps every other member's through its packed
// key (ucp_rkey_ptr), so every member can load from and store to every
// segment. A segment holds the control area (shm_segment.h), one staging
// buffer per announcement entry, and `slots` chunk-sized slots; every member
// must lay it out alike.
//
// Thread model: constant after Map (the memory itself is shared state with
// its own protocol, shm_all_reduce.cc). Ownership: the context and endpoints
// are not owned; ReleaseKeys must run before the endpoints close, the
// destructor (unmapping) before ucp_cleanup.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/bootstrap/tcp_store.h"

namespace athanor {
namespace ucx_internal {

class ShmSegments {
 public:
  struct Layout {
    size_t chunk_bytes = 0, slots = 0, stage_bytes = 0;
  };
  // Maps this member's segment, publishes its key under `prefix` in the
  // store and maps the other members' (`eps` and `ranks` by member, ours
  // null). A segment that cannot be shared is no error: why_not() says why
  // (every member must then agree not to use them). Errors: the store's.
  static absl::StatusOr<std::unique_ptr<ShmSegments>> Map(
      ucp_context_h context, const std::vector<ucp_ep_h>& eps, const std::vector<int>& ranks,
      int index, const Layout& layout, TcpStoreClient* store, const std::string& prefix,
      std::chrono::milliseconds timeout);
  ~ShmSegments();
  ShmSegments(const ShmSegments&) = delete;
  ShmSegments& operator=(const ShmSegments&) = delete;

  const std::string& why_not() const { return why_not_; }
  // Every member's segment as mapped here, by member.
  const std::vector<char*>& all() const { return segment_; }
  char* Stage(int member, int entry) const;
  char* Slot(int member, uint64_t chunk) const;
  // Releases the peers' keys: before their endpoints close.
  void ReleaseKeys();

 private:
  ShmSegments(ucp_context_h context, const Layout& layout) : context_(context), layout_(layout) {}

  const ucp_context_h context_;
  const Layout layout_;
  ucp_mem_h memh_ = nullptr;
  std::vector<ucp_rkey_h> rkeys_;
  std::vector<char*> segment_;
  std::string why_not_;
};

}  // namespace ucx_internal
}  // namespace athanor
