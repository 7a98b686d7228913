// ShmAllReduce: all-reduce among the ranks of one host through shared
// memory, with an optional stage between hosts (the hierarchical all-reduce).
//
// Each member owns a segment in shared memory that every other member maps
// (ShmSegments, shm_segments.h). Every member runs the ops in one agreed
// order (ShmOpOrder, shm_op_order.h). The algorithm is described in
// shm_all_reduce.cc.
//
// Two uses:
//  - every rank of the communicator on one host: the whole all-reduce;
//  - ranks on several hosts (InterHost set): each host's members
//    reduce-scatter a chunk through shared memory, every member all-reduces
//    the blocks it owns with their owners on the other hosts (InterHost),
//    and the members all-gather the result through shared memory. Chunks
//    are pipelined: the exchange of one chunk between hosts runs while the
//    next chunks are copied and reduced on the host.
//
// Thread model: not thread-safe. Its owner calls every method under one
// lock (the OpEngine's), except Nap; nothing here blocks (Nap aside) or
// calls back except into InterHost, under that same lock.
// Ownership: ShmOp objects belong to the caller and must outlive their
// Submit .. Finished/Abandon span; InterHost is not owned and outlives this.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/communicator.h"

namespace athanor {
namespace ucx_internal {

struct ShmOp;
class ShmOpOrder;
class ShmSegments;
struct Counter;
struct SharedControl;

// The stage between hosts of the hierarchical all-reduce, and its op order.
class InterHost {
 public:
  virtual ~InterHost() = default;
  // Start all-reducing `count` elements at `data` (block `block` of chunk
  // `chunk` of `op`, already reduced on this host) with the block's owners
  // on the other hosts; the result replaces `data` (not yet scaled for avg).
  virtual absl::Status Start(ShmOp* op, size_t chunk, int block, char* data, size_t count) = 0;
  // True once every block started for (op, chunk) is done; an error when a
  // transfer failed. Never blocks.
  virtual absl::StatusOr<bool> Finish(ShmOp* op, size_t chunk) = 0;
  // `op` ends early (an error): drop what was started for it.
  virtual void Abandon(ShmOp* op) = 0;
  // Every host runs the ops in one order, the one the host of world rank 0
  // agrees on: its leader (world rank 0) publishes the key of its op
  // number d, and the other hosts' leaders receive it.
  virtual void PublishOrder(uint64_t d, uint64_t key) = 0;
  virtual bool ReceiveOrder(uint64_t d, uint64_t* key) = 0;
};

struct ShmOpState;

// One all-reduce on this path.
struct ShmOp {
  const char* send = nullptr;
  char* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t user_tag = 0;
  uint64_t net_tag = 0;  // for InterHost: user tag and sequence bits
  std::unique_ptr<ShmOpState> state;  // ShmAllReduce's
  ShmOp();
  ~ShmOp();
};

class ShmAllReduce {
 public:
  struct Options {
    int index = 0;                 // this rank's place in the group
    std::vector<int> ranks;        // by place: the member's rank in the communicator
    std::vector<ucp_ep_h> eps;     // by place; ours null (not owned)
    size_t chunk_bytes = 512 << 10;
    int slots = 4;
    size_t one_shot_bytes = 16 << 10;  // staged whole at submission (one host only)
    // Hierarchical: blocks per chunk (the most ranks on one host), the world
    // size (avg divides by it), whether this host follows another's op
    // order, and the stage between hosts. Null inter: one host.
    int blocks = 0;
    int world_size = 0;
    bool follows_order = false;
    InterHost* inter = nullptr;
  };

  // Maps this rank's segment and publishes its key under `prefix` in the
  // store; maps the other members'. A segment that cannot be shared is no
  // error: the result's why_not() says why (every member must then agree
  // not to use it). Errors: the store (DeadlineExceeded, Unavailable).
  static absl::StatusOr<std::unique_ptr<ShmAllReduce>> Create(
      ucp_context_h context, const Options& options, TcpStoreClient* store,
      const std::string& prefix, std::chrono::milliseconds timeout);
  ~ShmAllReduce();  // unmaps the segment: call before ucp_cleanup
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  const std::string& why_not() const { return why_not_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  int slots() const { return static_cast<int>(slots_); }
  // Releases the peers' keys: before their endpoints close.
  void ReleaseKeys();

  // Announces `op` (its send, recv, count, type, op and tags set). Errors:
  // ResourceExhausted with too many ops pending.
  absl::Status Submit(ShmOp* op);
  // Moves `op` as far as the peers allow; true once it is finished. An
  // error (mismatched calls, a failed exchange) ends it.
  absl::StatusOr<bool> Advance(ShmOp* op);
  // `op` ends with an error elsewhere (timeout, dead peer, abort).
  void Abandon(ShmOp* op);
  // Where every member stands, for timeout messages.
  std::string Progress() const;
  // Sleeps until the member the last Advance waited for moves on (at most
  // `max`) and returns true; false at once when that Advance waited on no
  // member's chunk counter (the op order, or the hierarchical form, which
  // also waits on the network). Unlike the rest, callable without the
  // owner's lock, so a waiting thread can sleep without holding it.
  bool Nap(std::chrono::microseconds max) const;
  // How many chunk steps this rank has published so far: a waiter that
  // sees it move is not stuck.
  uint64_t moves() const { return moves_; }

  // Where the time of the hierarchical all-reduces went, summed over ops
  // (seconds): wall time from submission to finish; copying and reducing on
  // this host; scaling, copying out and gathering; and the exchanges between
  // hosts, from a chunk's first block started to its finish seen (chunks
  // overlap, so this may exceed the wall time).
  struct PhaseTimes {
    uint64_t ops = 0;
    double wall = 0, local = 0, out = 0, exchange = 0;
  };
  const PhaseTimes& phase_times() const { return times_; }

 private:
  ShmAllReduce(ucp_context_h context, const Options& options);
  absl::Status SetUp(TcpStoreClient* store, const std::string& prefix,
                     std::chrono::milliseconds timeout);
  char* Slot(int q, uint64_t chunk) const;
  absl::StatusOr<bool> AdvanceFlat(ShmOp* op);
  absl::StatusOr<bool> AdvanceHierarchical(ShmOp* op);
  bool Owns(int block) const { return block % n_ == r_; }
  // Whether every peer brought `counter` to `value`; if not, remembers the
  // first that has not, for Nap.
  bool Await(Counter SharedControl::*counter, uint64_t value);

  // Constant after Create.
  const ucp_context_h context_;
  const Options options_;
  const int n_, r_;
  size_t chunk_bytes_ = 0, slots_ = 0, stage_bytes_ = 0;
  int blocks_ = 0;  // per chunk: n_ on one host, Options::blocks across hosts
  std::unique_ptr<ShmSegments> segments_;
  std::vector<char*> segment_;  // segments_->all(): by member, ours at r_
  std::string why_not_;

  // Op state (the owner's lock): which op runs (made by SetUp), and the
  // chunks' timings.
  std::unique_ptr<ShmOpOrder> order_;
  PhaseTimes times_;
  // What the last Advance waited for (Await), read by Nap without the lock:
  // a member's control area, its counter, the value. Null owner: nothing.
  std::atomic<SharedControl*> nap_owner_{nullptr};
  std::atomic<const std::atomic<uint64_t>*> nap_counter_{nullptr};
  std::atomic<uint64_t> nap_value_{0};
  uint64_t moves_ = 0;
};

}  // namespace ucx_internal
}  // namespace athanor
