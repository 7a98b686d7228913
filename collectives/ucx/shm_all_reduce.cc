// The shared-memory all-reduce (ShmAllReduce, see shm_all_reduce.h): the
// whole all-reduce when every rank of a communicator lives on one host, and
// the part inside each host of the hierarchical all-reduce. This file sets
// segments up and cuts ops into chunks; shm_op_order.cc announces the ops and
// agrees on their order; shm_chunks.cc runs the chunks; shm_segment.h lays
// the segment out.
//
// Why: between two processes UCX moves a large message with a cross-memory
// copy (process_vm_readv), which on a small VM runs at a third of memcpy's
// speed, and the ring then reads the copy again to reduce it. Here every rank
// owns a segment that UCX allocated in shared memory (ucp_mem_map with
// UCP_MEM_MAP_ALLOCATE); its peers map it through the packed memory key
// (ucp_rkey_ptr), so every rank can load from and store to every segment.
//
// A segment holds a control area (counters and a table of announced ops), one
// staging buffer per table entry, and `slots` chunk-sized slots.
//
// Which op runs: calls with different tags may be issued in different orders
// on different ranks, so every rank runs the ops in one agreed order, that of
// ShmOpOrder (shm_op_order.cc), across hosts too. On submission a rank
// announces the op in a table in its segment.
//
// Small ops (UcxTuning::shared_one_shot_bytes) are staged whole into their
// entry's buffer at submission; once the op runs, every rank reduces the
// staged inputs of all ranks, in rank order (so all get the same bits), and
// is done: no synchronisation but the order. An entry is reused once every
// rank has finished its op (`decided`).
//
// Larger ops are cut into chunks, and a chunk's elements into one share per
// rank. For each chunk (numbered globally over the communicator's life, so
// slot = chunk % slots):
//   0. copy:   rank r copies every share but its own of its input into its
//              slot, then publishes copied = chunk + 1;
//   1. reduce: once every peer has copied, r reduces its own share of its
//              input with the same share of every peer's slot into its own
//              slot (the share nobody else writes), scales it for avg, copies
//              it to the output, then publishes reduced = chunk + 1;
//   2. gather: once every peer has reduced, r copies each peer's share from
//              that peer's slot to its output, then publishes done = chunk + 1.
// A slot is reused for chunk + slots only once every peer is done with chunk,
// so with several slots a rank copies ahead while its peers still gather.
// Each counter is written by one rank only (release) and read by the others
// (acquire); table entries are read as seqlocks.
//
// Across hosts (Options::inter set), a chunk is cut into `blocks` blocks,
// the most ranks any host has; member j of a host of k members owns blocks
// b with b % k == j, so every block has one owner on every host. Per chunk:
//   0. copy:     as above, every block the rank does not own;
//   1. reduce:   the rank reduces its blocks on this host into its slot and
//                starts their exchange with the owners on other hosts
//                (InterHost::Start); then it goes on to the next chunk, up to
//                `slots` chunks ahead (the pipeline);
//   2. exchange: once InterHost::Finish says the chunk's blocks are
//                all-reduced across hosts (in host order, so every rank has
//                the same bits), the rank scales them for avg, copies them
//                out and publishes reduced = chunk + 1;
//   3. gather:   as above.
//
// Nothing here blocks: Advance moves as far as the peers allow and returns;
// the caller's Wait, Done or the progress thread call it again (so a dead
// peer, seen through its pidfd, and deadlines work as for tag messages).
#include "collectives/ucx/shm_all_reduce.h"

#include <algorithm>
#include <cstring>

#include "collectives/ucx/shm_op_order.h"
#include "collectives/ucx/shm_segment.h"
#include "collectives/ucx/shm_segments.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

namespace {

// Smallest chunk of a call across hosts. Each chunk pays its own waits at
// every stage (the local reduce-scatter, the exchange, the gather), and on
// 2 + 2 namespace hosts that cost more than the overlap of smaller chunks
// gained: 1 MiB chunks took 1-4 MiB calls 8-25% faster than 256 KiB ones
// (docs/benchmarks.md).
constexpr size_t kMinHierChunkBytes = 1 << 20;

}  // namespace

ShmOp::ShmOp() = default;
ShmOp::~ShmOp() = default;

ShmAllReduce::ShmAllReduce(ucp_context_h context, const Options& options)
    : context_(context),
      options_(options),
      n_(static_cast<int>(options.eps.size())),
      r_(options.index) {}

absl::StatusOr<std::unique_ptr<ShmAllReduce>> ShmAllReduce::Create(
    ucp_context_h context, const Options& options, TcpStoreClient* store,
    const std::string& prefix, std::chrono::milliseconds timeout) {
  std::unique_ptr<ShmAllReduce> shm(new ShmAllReduce(context, options));
  RETURN_IF_ERROR(shm->SetUp(store, prefix, timeout));
  return shm;
}

absl::Status ShmAllReduce::SetUp(TcpStoreClient* store, const std::string& prefix,
                                 std::chrono::milliseconds timeout) {
  const int n = n_, r = r_;
  chunk_bytes_ = std::max<size_t>(4096, options_.chunk_bytes / 4096 * 4096);
  slots_ = static_cast<size_t>(std::max(2, options_.slots));
  stage_bytes_ = options_.inter != nullptr ? 0 : (options_.one_shot_bytes + 63) / 64 * 64;
  blocks_ = options_.inter != nullptr ? std::max(options_.blocks, n) : n;
  ShmSegments::Layout layout{chunk_bytes_, slots_, stage_bytes_};
  ASSIGN_OR_RETURN(segments_, ShmSegments::Map(context_, options_.eps, options_.ranks, r, layout,
                                               store, prefix, timeout));
  why_not_ = segments_->why_not();
  segment_ = segments_->all();
  order_ = std::make_unique<ShmOpOrder>(segments_.get(), options_.ranks, r, options_.follows_order,
                                        options_.inter);
  return absl::OkStatus();
}

void ShmAllReduce::ReleaseKeys() { segments_->ReleaseKeys(); }

ShmAllReduce::~ShmAllReduce() = default;

char* ShmAllReduce::Slot(int q, uint64_t chunk) const { return segments_->Slot(q, chunk); }

absl::Status ShmAllReduce::Submit(ShmOp* op) {
  auto state = std::make_unique<ShmOpState>();
  const size_t elem = DataTypeSize(op->type);
  const size_t bytes = op->count * elem;
  state->send = op->send;
  // Output overlapping the input other than exactly: work in place on the
  // output (a later chunk's input could be overwritten before it is read).
  if (op->send != op->recv && op->send < op->recv + bytes && op->recv < op->send + bytes) {
    std::memmove(op->recv, op->send, bytes);
    state->send = op->recv;
  }
  // Across hosts, large slots pay for large calls (fewer, longer transfers
  // in flight); a call is cut into about `slots` chunks, but none smaller
  // than kMinHierChunkBytes (or the slot). Every member computes the same
  // from the call alone.
  size_t chunk_bytes = chunk_bytes_;
  if (options_.inter != nullptr) {
    chunk_bytes = std::min(chunk_bytes_, std::max(kMinHierChunkBytes, bytes / slots_ / 4096 * 4096));
  }
  state->chunk_elems = std::max<size_t>(1, chunk_bytes / elem);
  state->chunks = (op->count + state->chunk_elems - 1) / state->chunk_elems;
  state->one_shot = bytes <= stage_bytes_;
  state->stream = bytes >= kStreamBytes;
  if (options_.inter != nullptr) {
    state->submitted = std::chrono::steady_clock::now();
    state->exchange_started.resize(slots_);
  }
  return order_->Announce(op, std::move(state));
}

void ShmAllReduce::Abandon(ShmOp* op) {
  order_->Abandon(op);
  if (options_.inter != nullptr) options_.inter->Abandon(op);
}

std::string ShmAllReduce::Progress() const { return order_->Progress(); }

}  // namespace ucx_internal
}  // namespace athanor
