// TagSchedulePath: collectives as schedules of UCX tag messages
// (schedule.h): the ring, recursive doubling, the chain broadcast and the
// dissemination barrier, run by the OpEngine as TagOps; plus the 2-rank
// blocking small all-reduce (PairAllReduce, ucx_pair.cc), which runs on the
// caller's thread with no schedule at all.
//
// Thread model: every method takes the engine's lock itself; the scratch
// pool is guarded by it. Ownership: the engine and the worker are not owned
// and outlive this path; scratch buffers live until the path is destroyed
// (after the worker, so a leaked request never writes into freed memory).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/schedule.h"
#include "collectives/ucx/ucx_worker.h"

namespace athanor {
namespace ucx_internal {

class TagSchedulePath {
 public:
  TagSchedulePath(OpEngine* engine, const UcxWorker* ucx, int rank, int world_size,
                  const UcxTuning& tuning);
  ~TagSchedulePath();  // frees the scratch buffers
  TagSchedulePath(const TagSchedulePath&) = delete;
  TagSchedulePath& operator=(const TagSchedulePath&) = delete;

  // Recursive doubling (small calls, or fewer elements than ranks).
  std::unique_ptr<Work> RecursiveDoubling(const void* send, void* recv, size_t count,
                                          DataType type, ReduceOp op,
                                          const CollectiveOptions& options);
  // Pipelined ring reduce-scatter + all-gather.
  std::unique_ptr<Work> Ring(const void* send, void* recv, size_t count, DataType type,
                             ReduceOp op, const CollectiveOptions& options);
  std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, size_t recv_count,
                                      DataType type, ReduceOp op, const CollectiveOptions& options);
  std::unique_ptr<Work> AllGather(const void* send, void* recv, size_t send_count, DataType type,
                                  const CollectiveOptions& options);
  std::unique_ptr<Work> Broadcast(void* buffer, size_t count, DataType type, int root,
                                  const CollectiveOptions& options);
  std::unique_ptr<Work> Barrier(const CollectiveOptions& options);
  // Blocking 2-rank small all-reduce (ucx_pair.cc): one send and one receive
  // with the tags of RecursiveDoublingAllReduce's single step, progressed
  // inline. nullptr: not applicable (ops pending, overlapping buffers); use
  // RecursiveDoubling.
  std::unique_ptr<Work> PairAllReduce(const void* send, void* recv, size_t count, DataType type,
                                      ReduceOp op, const CollectiveOptions& options);

  // For TagOp.
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  size_t window() const { return window_; }
  ucp_ep_h ep(int peer) const { return ucx_->ep(peer); }
  // Under the engine's lock.
  void ReleaseScratch(size_t bytes, char* scratch);

 private:
  ScheduleParams Params(DataType type, ReduceOp op, size_t block_bytes) const;
  // Takes `scratch_bytes` of scratch into params.scratch, builds the
  // schedule with build(params) and hands it to the engine.
  template <typename Build>
  std::unique_ptr<Work> Submit(ScheduleParams params, size_t scratch_bytes, DataType type,
                               ReduceOp op, const char* what, const CollectiveOptions& options,
                               Build build);
  char* AcquireScratch(size_t bytes);  // under the engine's lock

  // Constant after construction.
  OpEngine* const engine_;
  const UcxWorker* const ucx_;
  const int rank_, world_size_;
  const size_t window_, segment_bytes_, small_bytes_;
  // The engine's lock.
  std::vector<std::pair<size_t, char*>> free_scratch_;  // (bytes, buffer)
  std::vector<char*> all_scratch_;
  char* pair_scratch_ = nullptr;  // PairAllReduce's receive buffer
};

}  // namespace ucx_internal
}  // namespace athanor
