#include "collectives/ucx/shm_segments.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "collectives/ucx/shm_segment.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

absl::StatusOr<std::unique_ptr<ShmSegments>> ShmSegments::Map(
    ucp_context_h context, const std::vector<ucp_ep_h>& eps, const std::vector<int>& ranks,
    int index, const Layout& layout, TcpStoreClient* store, const std::string& prefix,
    std::chrono::milliseconds timeout) {
  std::unique_ptr<ShmSegments> seg(new ShmSegments(context, layout));
  const int n = static_cast<int>(eps.size());
  // This rank's segment: UCX allocates it where peers can map it (System V
  // or POSIX shared memory, whichever the context has).
  std::string mine;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = kControlBytes + kEntries * layout.stage_bytes + layout.slots * layout.chunk_bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t s = ucp_mem_map(context, &mp, &seg->memh_);
  void* rkey_buf = nullptr;
  size_t rkey_len = 0;
  if (s != UCS_OK) {
    seg->memh_ = nullptr;
    seg->why_not_ = absl::StrCat("ucp_mem_map: ", ucs_status_string(s));
  } else {
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    s = ucp_mem_query(seg->memh_, &attr);
    if (s == UCS_OK) s = ucp_rkey_pack(context, seg->memh_, &rkey_buf, &rkey_len);
    if (s != UCS_OK) {
      seg->why_not_ = absl::StrCat("ucp_rkey_pack: ", ucs_status_string(s));
    } else {
      uint64_t address = reinterpret_cast<uint64_t>(attr.address);
      new (attr.address) SharedControl{};
      const uint64_t geometry[4] = {address, layout.chunk_bytes, layout.slots, layout.stage_bytes};
      mine.assign(reinterpret_cast<const char*>(geometry), sizeof(geometry));
      mine.append(static_cast<const char*>(rkey_buf), rkey_len);
      ucp_rkey_buffer_release(rkey_buf);
    }
  }
  // Everyone publishes, even a rank that failed, so nobody waits for it.
  ASSIGN_OR_RETURN(std::vector<std::string> keys,
                   AllGatherThroughStore(store, prefix, index, n, mine, timeout));
  seg->segment_.assign(n, nullptr);
  seg->rkeys_.assign(n, nullptr);
  for (int q = 0; q < n && seg->why_not_.empty(); ++q) {
    uint64_t geometry[4];
    if (keys[q].size() <= sizeof(geometry)) {
      seg->why_not_ = absl::StrCat("rank ", ranks[q], " has no segment");
      break;
    }
    std::memcpy(geometry, keys[q].data(), sizeof(geometry));
    const uint64_t address = geometry[0];
    if (geometry[1] != layout.chunk_bytes || geometry[2] != layout.slots ||
        geometry[3] != layout.stage_bytes) {
      seg->why_not_ = absl::StrCat("rank ", ranks[q],
                              " lays out its segment differently (ATHANOR_UCX_SHARED_* differ)");
      break;
    }
    if (q == index) {
      seg->segment_[q] = reinterpret_cast<char*>(address);
      continue;
    }
    s = ucp_ep_rkey_unpack(eps[q], keys[q].data() + sizeof(geometry), &seg->rkeys_[q]);
    void* local = nullptr;
    if (s == UCS_OK) s = ucp_rkey_ptr(seg->rkeys_[q], address, &local);
    if (s != UCS_OK) {
      seg->why_not_ = absl::StrCat("rank ", ranks[q], "'s segment cannot be mapped here (",
                              ucs_status_string(s), "; UCX_TLS may leave out shared memory)");
      break;
    }
    seg->segment_[q] = static_cast<char*>(local);
  }
  return seg;
}

char* ShmSegments::Stage(int member, int entry) const {
  return segment_[member] + kControlBytes + entry * layout_.stage_bytes;
}

char* ShmSegments::Slot(int member, uint64_t chunk) const {
  return segment_[member] + kControlBytes + kEntries * layout_.stage_bytes +
         (chunk % layout_.slots) * layout_.chunk_bytes;
}

void ShmSegments::ReleaseKeys() {
  for (ucp_rkey_h& k : rkeys_) {
    if (k != nullptr) ucp_rkey_destroy(k);
    k = nullptr;
  }
}

ShmSegments::~ShmSegments() {
  ReleaseKeys();
  if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
}

}  // namespace ucx_internal
}  // namespace athanor
