// HierExchange: the stage between hosts of the hierarchical all-reduce
// (InterHost, see shm_all_reduce.h), over UCX tag messages.
//
// For each block of a chunk, its owners (one per host) all-reduce it by
// one of two algorithms, chosen per call from its size alone (so all agree):
//  - direct: every owner sends its host's partial to the owners on the other
//    hosts and receives theirs in one step, then reduces the partials in
//    host order (every rank holds the same bits). One round trip; each owner
//    sends (hosts - 1) x the block. With two hosts this is the only one (the
//    ring and recursive halving-doubling coincide with it).
//  - ring (three hosts or more, calls of at least ring_min_bytes): the block
//    is cut into one piece per host; hosts - 1 reduce-scatter steps around
//    the owners in host order, then hosts - 1 all-gather steps. Each owner
//    sends 2 (hosts - 1) / hosts x the block, in 2 (hosts - 1) steps. Every
//    piece is reduced once, by one owner, so all ranks hold the same bits.
// The steps of all blocks a rank owns in a chunk advance together.
// Tags: the op's tag and sequence bits, the sender's rank, the chunk (12
// bits) and the step (6 bits) and block (6 bits).
//
// The partials travel over UCX tag messages, or, when SetLinks gave it
// plain TCP connections to those owners (socket_links.h; chosen where UCX
// would cross over TCP itself, whose transport moved a quarter of what the
// kernel's sockets do on namespace hosts), over those, with the same tags.
//
// It also carries the op order from world rank 0 to the other hosts'
// leaders: one 8-byte message per op, tagged kOrderTagBase | op number.
//
// Thread model: confined to the owner's lock (OpEngine::mu()), as is
// every UCX callback (they run inside ucp_worker_progress under that lock).
// Ownership: the worker, endpoints and topology are not owned and outlive
// this object.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/ucx/shm_all_reduce.h"
#include "collectives/ucx/socket_links.h"
#include "collectives/ucx/topology.h"

namespace athanor {
namespace ucx_internal {

class HierExchange final : public InterHost {
 public:
  HierExchange(ucp_worker_h worker, const std::vector<ucp_ep_h>* eps, const Topology* topology,
               int rank);
  ~HierExchange() override;

  // The ranks this one exchanges blocks with (every block's owner on every
  // other host, for the blocks this rank owns); symmetric.
  static std::vector<int> LinkPeers(const Topology& topology, int rank);
  // Carry the partials over `links` (connected to LinkPeers) from now on.
  void SetLinks(std::unique_ptr<SocketLinks> links) { links_ = std::move(links); }
  bool has_links() const { return links_ != nullptr; }
  // Calls of at least `bytes` run the ring between three hosts or more.
  void SetRingMinBytes(size_t bytes) { ring_min_bytes_ = bytes; }
  // Whether a call of `bytes` runs the ring, and its name for logs.
  bool UsesRing(size_t bytes) const;
  std::string AlgorithmFor(size_t bytes) const;

  absl::Status Start(ShmOp* op, size_t chunk, int block, char* data, size_t count) override;
  absl::StatusOr<bool> Finish(ShmOp* op, size_t chunk) override;
  void Abandon(ShmOp* op) override;
  void PublishOrder(uint64_t d, uint64_t key) override;
  bool ReceiveOrder(uint64_t d, uint64_t* key) override;
  // Frees what UCX has finished with (abandoned transfers, order sends).
  void Sweep();

 private:
  struct Transfer;
  struct Request {
    Transfer* transfer;
    int peer;
    void* handle = nullptr;  // UCX request while in flight
    bool receive = false;
  };
  struct Part {
    char* data;
    size_t count;
    char* partials;  // the other hosts' partials, in host order (ring: one piece)
    int block;
  };
  struct Transfer {
    DataType type;
    ReduceOp op;
    std::atomic<int> outstanding{0};  // UCX callbacks and the links' I/O thread
    ucs_status_t error = UCS_OK;
    int error_peer = -1;
    std::deque<Request> requests;
    std::vector<Part> parts;
    std::vector<char> scratch;
    // Ring: the step every part is in (posted, not yet finished).
    bool ring = false;
    int step = 0;
    uint64_t net_tag = 0;
    size_t chunk = 0;
  };
  struct OrderSend {
    uint64_t key;
    void* handle;
  };
  static void SendDone(void* request, ucs_status_t status, void* user_data);
  static void RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                       void* user_data);
  bool Post(Request* req, const void* buf, size_t bytes, uint64_t tag);
  void Reduce(Transfer* t);
  // Ring: posts step `t->step` of part `i`; reduces what step t->step
  // brought (RingFold, after it finished).
  bool PostRingStep(Transfer* t, size_t i);
  void RingFold(Transfer* t);

  const ucp_worker_h worker_;
  const std::vector<ucp_ep_h>* const eps_;
  const Topology* const topology_;
  const int rank_;
  const int host_;
  std::map<std::pair<const ShmOp*, size_t>, std::unique_ptr<Transfer>> transfers_;
  std::list<std::unique_ptr<Transfer>> abandoned_;  // until UCX lets go of them
  std::vector<std::vector<char>> free_scratch_;
  std::list<OrderSend> order_sends_;
  std::unique_ptr<SocketLinks> links_;  // null: the partials go over UCX
  size_t ring_min_bytes_ = ~size_t{0};
  // The order message being received: op number, request, value.
  uint64_t order_d_ = ~0ull;
  void* order_handle_ = nullptr;
  bool order_done_ = false;
  uint64_t order_value_ = 0;
};

}  // namespace ucx_internal
}  // namespace athanor
