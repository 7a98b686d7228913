// HierarchicalPath: the all-reduce across hosts when some host has several
// ranks. Shared memory on each host (ShmAllReduce) reduce-scatters every
// chunk, each block is all-reduced with its owners on the other hosts
// (HierExchange, over plain TCP links or UCX tag messages), and shared
// memory all-gathers the result. Chosen per call from its size alone (Use).
//
// Thread model: Use and Describe are constant; AllReduce takes the engine's
// lock, and the engine sweeps the exchange on every progress pass.
// Ownership: the engine, worker, endpoints and topology outlive this path.
// Tear-down in steps: ReleaseKeys before the endpoints close, DropExchange
// before the worker goes, the destructor (unmapping) before ucp_cleanup.
#pragma once

#include <memory>
#include <string>

#include "collectives/factory.h"
#include "collectives/ucx/hier_exchange.h"
#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/shm_pending_op.h"
#include "collectives/ucx/topology.h"
#include "collectives/ucx/ucx_worker.h"

namespace athanor {
namespace ucx_internal {

class HierarchicalPath {
 public:
  // Null (no error) where it is off, no host has several ranks, or some rank
  // cannot map the segments (every rank then agrees). Errors: the store's,
  // or a peer that never links up.
  static absl::StatusOr<std::unique_ptr<HierarchicalPath>> Create(
      OpEngine* engine, const UcxWorker& ucx, TcpStoreClient* store, const Topology* topology,
      const CommunicatorOptions& options);
  ~HierarchicalPath();

  bool Use(size_t bytes) const { return bytes >= min_bytes_; }
  // How a call of `bytes` crosses hosts, for the log.
  std::string Describe(size_t bytes) const;
  std::unique_ptr<Work> AllReduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op, const CollectiveOptions& options) {
    return SubmitShm(engine_, shm_.get(), true, send, recv, count, type, op, options);
  }
  void ReleaseKeys() { shm_->ReleaseKeys(); }
  void DropExchange() ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_->mu());

 private:
  HierarchicalPath(OpEngine* engine, int rank, size_t min_bytes)
      : engine_(engine), rank_(rank), min_bytes_(min_bytes) {}

  OpEngine* const engine_;
  const int rank_;
  const size_t min_bytes_;
  std::unique_ptr<HierExchange> inter_;  // the engine's lock
  std::unique_ptr<ShmAllReduce> shm_;
};

}  // namespace ucx_internal
}  // namespace athanor
