// What the shared-memory and hierarchical paths share: their ops as the
// OpEngine runs them (ShmPendingOp over a ShmOp of ShmAllReduce), their
// submission, and the set-up every rank must agree on.
//
// Thread model: under the engine's lock, as every PendingOp. Ownership: the
// ShmAllReduce is not owned and outlives its ops.
#pragma once

#include <memory>
#include <string>

#include "collectives/bootstrap/tcp_store.h"
#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/shm_all_reduce.h"

namespace athanor {
namespace ucx_internal {

class ShmPendingOp final : public PendingOp {
 public:
  ShmPendingOp(ShmAllReduce* shm, const CollectiveOptions& options)
      : PendingOp("all-reduce", options), shm_(shm) {}
  ShmOp& op() { return op_; }

  void Advance(OpEngine* engine) override;
  void Cancel(ucp_worker_h) override { shm_->Abandon(&op_); }
  bool raises_events() const override { return false; }
  std::string Progress() const override { return shm_->Progress(); }
  bool Nap(std::chrono::microseconds max) override { return shm_->Nap(max); }

 private:
  ShmAllReduce* const shm_;
  ShmOp op_;
};

// Announces the all-reduce to `shm` and hands it to `engine`. `numbered`:
// it also takes a tag sequence number (its messages between hosts).
std::unique_ptr<Work> SubmitShm(OpEngine* engine, ShmAllReduce* shm, bool numbered,
                                const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, const CollectiveOptions& options);

// Creates `shm` over `options` and has every one of the communicator's
// `world_size` ranks agree it works alike everywhere (the same verdict and
// geometry: all must take the same path for the same call). Null, with
// *why_not set, where some rank cannot use it. Errors: the store's.
absl::StatusOr<std::unique_ptr<ShmAllReduce>> CreateAgreedShm(
    ucp_context_h context, const ShmAllReduce::Options& options, TcpStoreClient* store,
    const std::string& prefix, int rank, int world_size, std::chrono::milliseconds timeout,
    std::string* why_not);

}  // namespace ucx_internal
}  // namespace athanor
