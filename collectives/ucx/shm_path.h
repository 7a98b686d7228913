// SharedMemoryPath: the all-reduce when every rank lives on this host,
// through segments UCX allocates and every peer maps (ShmAllReduce,
// shm_all_reduce.h). Chosen per call from its size alone (Use), so every
// rank takes it for the same calls.
//
// Thread model: Use is constant; AllReduce takes the engine's lock.
// Ownership: the engine outlives this path; the segments are unmapped in
// the destructor, which must run before ucp_cleanup (UcxWorker's).
#pragma once

#include <memory>

#include "collectives/factory.h"
#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/shm_all_reduce.h"
#include "collectives/ucx/shm_pending_op.h"
#include "collectives/ucx/topology.h"
#include "collectives/ucx/ucx_worker.h"

namespace athanor {
namespace ucx_internal {

class SharedMemoryPath {
 public:
  // Null (no error) where shared memory is off or some rank cannot map the
  // segments (every rank then agrees). Errors: the store's.
  static absl::StatusOr<std::unique_ptr<SharedMemoryPath>> Create(
      OpEngine* engine, const UcxWorker& ucx, TcpStoreClient* store, const Topology& topology,
      const CommunicatorOptions& options);

  // All-reduces of `bytes` go this way: from shared_min_bytes, and with two
  // ranks only above small_bytes (where the pair path is faster).
  bool Use(size_t bytes) const {
    return bytes >= min_bytes_ && (world_size_ > 2 || bytes > small_bytes_);
  }
  std::unique_ptr<Work> AllReduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op, const CollectiveOptions& options) {
    return SubmitShm(engine_, shm_.get(), false, send, recv, count, type, op, options);
  }
  // Releases the peers' keys: before the endpoints close.
  void ReleaseKeys() { shm_->ReleaseKeys(); }

 private:
  SharedMemoryPath(OpEngine* engine, std::unique_ptr<ShmAllReduce> shm, int world_size,
                   const UcxTuning& tuning)
      : engine_(engine), shm_(std::move(shm)), world_size_(world_size),
        min_bytes_(tuning.shared_min_bytes), small_bytes_(tuning.small_bytes) {}

  OpEngine* const engine_;
  const std::unique_ptr<ShmAllReduce> shm_;
  const int world_size_;
  const size_t min_bytes_, small_bytes_;
};

}  // namespace ucx_internal
}  // namespace athanor
