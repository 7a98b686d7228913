#include "collectives/ucx/shm_path.h"

#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

absl::StatusOr<std::unique_ptr<SharedMemoryPath>> SharedMemoryPath::Create(
    OpEngine* engine, const UcxWorker& ucx, TcpStoreClient* store, const Topology& topology,
    const CommunicatorOptions& o) {
  const UcxTuning& t = o.ucx;
  const int n = o.world_size, r = o.rank;
  if (!t.shared_memory || n < 2 || topology.num_hosts() != 1) return nullptr;
  ShmAllReduce::Options so;
  so.index = topology.local_index[r];
  so.ranks = topology.host_ranks(r);
  for (int q : so.ranks) so.eps.push_back(q == r ? nullptr : ucx.ep(q));
  so.chunk_bytes = t.shared_chunk_bytes;
  so.slots = t.shared_slots;
  so.one_shot_bytes = t.shared_one_shot_bytes;
  std::string why_not;
  ASSIGN_OR_RETURN(std::unique_ptr<ShmAllReduce> shm,
                   CreateAgreedShm(ucx.context(), so, store, "ucx/shm/0", r, n, o.timeout, &why_not));
  if (shm == nullptr) {
    if (r == 0) ATHANOR_LOG(INFO) << "ucx: no shared-memory all-reduce: " << why_not;
    return nullptr;
  }
  if (r == 0) {
    const size_t from = n > 2 ? t.shared_min_bytes : std::max(t.shared_min_bytes, t.small_bytes + 1);
    ATHANOR_LOG(INFO) << "ucx: all " << n << " ranks on this host; all-reduces from " << from
                      << " B go through shared memory (" << shm->slots() << " slots of "
                      << shm->chunk_bytes() << " B per rank)";
  }
  return std::unique_ptr<SharedMemoryPath>(new SharedMemoryPath(engine, std::move(shm), n, t));
}

}  // namespace ucx_internal
}  // namespace athanor
