// Collective algorithms as static schedules of point-to-point steps.
//
// A Schedule is a list of independent Chains (one per pipeline segment); a
// Chain is a sequence of Steps run in order; a Step posts at most one send and
// one receive, and once both are done optionally reduces and scales. The
// executor (TagOp, tag_op.h) keeps at most `window` chains in flight and
// starts chain j only after chain j - window finished, so chain j may use
// scratch slot j % window without conflict. Pure data; no I/O, no threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/communicator.h"

namespace athanor {

struct Step {
  // Message id inside the chain, matched with the peer's step that has the
  // same id; -1 means "this step's index" (right when both sides run the same steps).
  int msg = -1;
  int send_peer = -1;  // -1: no send
  const void* send_buf = nullptr;
  size_t send_bytes = 0;
  int recv_peer = -1;  // -1: no receive
  void* recv_buf = nullptr;
  size_t recv_bytes = 0;
  // After both complete: reduce_dst = reduce_a (op) recv_buf over reduce_count
  // elements (when reduce_count > 0), then, if scale, divide reduce_dst (or
  // scale_buf when set) by world size.
  void* reduce_dst = nullptr;
  const void* reduce_a = nullptr;
  size_t reduce_count = 0;
  void* scale_buf = nullptr;
  size_t scale_count = 0;
};

struct Chain {
  std::vector<Step> steps;
};

struct Schedule {
  std::vector<Chain> chains;
  // Done once before any chain starts: memmove(pre_copy_dst, pre_copy_src, bytes).
  void* pre_copy_dst = nullptr;
  const void* pre_copy_src = nullptr;
  size_t pre_copy_bytes = 0;
};

struct ScheduleParams {
  int rank = 0;
  int world_size = 1;
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  size_t segment_bytes = 512 << 10;  // pipeline segment
  int window = 4;                    // chains in flight
  char* scratch = nullptr;           // window * 2 * segment_bytes bytes
};

// Segment size actually used for `max_bytes` per block: at least
// params.segment_bytes, raised so that a schedule has at most kMaxChains chains.
constexpr size_t kMaxChains = 4096;
size_t SegmentBytesFor(size_t block_bytes, const ScheduleParams& params);
// Scratch bytes the schedules below need for these params.
size_t ScratchBytes(const ScheduleParams& params);

// Ring reduce-scatter then ring all-gather; segments pipelined. Out of place
// (send != recv, not overlapping) it receives straight into `recv` and needs
// no scratch (p.scratch may be null).
Schedule RingAllReduce(const ScheduleParams& p, const void* send, void* recv, size_t count);
// Recursive doubling (non-powers of two fold the extra ranks in first); one chain.
Schedule RecursiveDoublingAllReduce(const ScheduleParams& p, const void* send, void* recv,
                                    size_t count);
Schedule RingReduceScatter(const ScheduleParams& p, const void* send, void* recv,
                           size_t recv_count);
Schedule RingAllGather(const ScheduleParams& p, const void* send, void* recv, size_t send_count);
// Pipelined chain root -> root+1 -> ... -> root-1.
Schedule ChainBroadcast(const ScheduleParams& p, void* buffer, size_t count, int root);
// Dissemination barrier with empty messages.
Schedule DisseminationBarrier(const ScheduleParams& p);

}  // namespace athanor
