// The shared-memory all-reduce (ShmAllReduce, see shm_all_reduce.h): the
// whole all-reduce when every rank of a communicator lives on one host, and
// the part inside each host of the hierarchical all-reduce. This file sets
// segments up, announces ops and agrees on their order; shm_chunks.cc runs
// the chunks; shm_segment.h lays the segment out.
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
// on different ranks (ucx_communicator.h), so every rank runs the ops in one
// agreed order, op by op ("decisions"). On submission a rank announces the op
// (tag and per-tag sequence number) in a free entry of its table, and keeps
// two words current: `decided`, how many ops it has finished, and `head`, the
// op it runs as the next one once it knows it, else its oldest unfinished op.
// Op number d is:
//  - X, when every rank has decided d ops and X heads every rank: each rank
//    submitted X before any other op it has not finished, and none has
//    adopted another op as number d (the common case: nobody waits for a
//    choice);
//  - otherwise rank 0's choice: the first of its unfinished ops, in its
//    submission order, that every rank has announced, published in a ring
//    (rank 0 heads with it before publishing).
// Both rules give the same op. If every rank is at d headed by X, rank 0 has
// not adopted another op, and when it does it finds X announced by all
// (it reads every table as of one `submitted` count per rank, so seeing a
// later op announced means seeing the earlier ones too) and X first in its
// order.
// The ranks' table entries for the op must agree (count, type, op), or the op
// fails with a clear error instead of mixing two calls.
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
// Every host runs the ops in the order world rank 0's host agrees on: rank 0
// sends the key of each op it adopts to the other hosts' leaders, who choose
// it for their host once every member there has announced it (the fast
// path, every member headed by the same op, is for rank 0's host only).
//
// Nothing here blocks: Advance moves as far as the peers allow and returns;
// the caller's Wait, Done or the progress thread call it again (so a dead
// peer, seen through its pidfd, and deadlines work as for tag messages).
#include "collectives/ucx/shm_all_reduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "collectives/reduce/reduce_kernels.h"
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
  return absl::OkStatus();
}

void ShmAllReduce::ReleaseKeys() { segments_->ReleaseKeys(); }

ShmAllReduce::~ShmAllReduce() = default;

char* ShmAllReduce::Slot(int q, uint64_t chunk) const { return segments_->Slot(q, chunk); }

void ShmAllReduce::FreeDrainedEntries() {
  SharedControl* me = Control(segment_[r_]);
  // Entries of ops every member has finished are free again.
  uint64_t all_decided = ~0ull;
  for (int q = 0; q < n_; ++q) {
    if (q != r_) {
      all_decided = std::min(all_decided,
                             Control(segment_[q])->decided.value.load(std::memory_order_acquire));
    }
  }
  for (size_t i = 0; i < draining_.size();) {
    if (all_decided > draining_[i].second) {
      me->entries[draining_[i].first].word.store(0, std::memory_order_release);
      draining_[i] = draining_.back();
      draining_.pop_back();
    } else {
      ++i;
    }
  }
}

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
  FreeDrainedEntries();
  SharedControl* me = Control(segment_[r_]);
  int unfinished = 0;
  for (const Entry& e : me->entries) {
    const uint64_t w = e.word.load(std::memory_order_relaxed);
    if (w != 0 && (w & 2) == 0) ++unfinished;
    if (w == 0 && state->entry < 0) state->entry = static_cast<int>(&e - me->entries);
  }
  if (unfinished >= kMaxPending || state->entry < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ucx: more than ", kMaxPending, " shared-memory all-reduces pending on rank ",
        options_.ranks[r_],
        "; wait for some before starting more"));
  }
  // Announce it; a small op is staged whole, so peers can reduce it as soon
  // as it runs.
  const uint64_t tseq = tag_seq_[op->user_tag]++;
  state->key = (((op->user_tag & 0xFFFFFull) << 32) | (tseq & 0xFFFFFFFFull)) + 1;
  if (state->one_shot) {
    std::memcpy(segments_->Stage(r_, state->entry), state->send, bytes);
  }
  Entry& e = me->entries[state->entry];
  e.word.store(0, std::memory_order_relaxed);
  e.key.store(state->key, std::memory_order_release);
  e.count.store(op->count, std::memory_order_release);
  e.type.store(static_cast<uint32_t>(op->type), std::memory_order_release);
  e.op.store(static_cast<uint32_t>(op->op), std::memory_order_release);
  e.word.store((submitted_++ << 2) | 1, std::memory_order_release);
  me->submitted.value.store(submitted_, std::memory_order_release);
  if (me->head.value.load(std::memory_order_relaxed) == 0) {
    me->head.value.store((state->key << 8) | state->entry, std::memory_order_release);
  }
  op->state = std::move(state);
  pending_.push_back(op);
  return absl::OkStatus();
}

ShmOp* ShmAllReduce::FindPending(uint64_t key) const {
  for (ShmOp* p : pending_) {
    if (p->state->key == key) return p;
  }
  return nullptr;
}

ShmOp* ShmAllReduce::ChooseAnnounced() const {
  // One snapshot of every table for the whole search.
  std::vector<uint64_t> submitted(n_);
  for (int q = 0; q < n_; ++q) {
    if (q != r_) submitted[q] = Control(segment_[q])->submitted.value.load(std::memory_order_acquire);
  }
  for (ShmOp* p : pending_) {
    bool everyone = true;
    EntryView v;
    for (int q = 0; q < n_ && everyone; ++q) {
      if (q != r_) everyone = FindEntry(Control(segment_[q]), p->state->key, submitted[q], &v) >= 0;
    }
    if (everyone) return p;
  }
  return nullptr;
}

absl::StatusOr<bool> ShmAllReduce::AdoptChoice() {
  const int n = n_, r = r_;
  const uint64_t d = decision_;
  if (pending_.empty()) return false;
  ShmOp* oldest = pending_.front();
  ShmOp* chosen = nullptr;
  std::vector<int> peer_entry(n, -1);
  peer_entry[r] = oldest->state->entry;
  if (!options_.follows_order) {
    chosen = oldest;
    for (int q = 0; q < n && chosen != nullptr; ++q) {
      if (q == r) continue;
      // Member q is at this same op number, and runs or heads with our oldest.
      const SharedControl* c = Control(segment_[q]);
      const uint64_t before = c->decided.value.load(std::memory_order_acquire);
      const uint64_t head = c->head.value.load(std::memory_order_acquire);
      const uint64_t after = c->decided.value.load(std::memory_order_acquire);
      if (before != d || after != d || (head >> 8) != oldest->state->key) chosen = nullptr;
      peer_entry[q] = static_cast<int>(head & 0xFF);
    }
  }
  SharedControl* leader = Control(segment_[0]);
  if (chosen == nullptr && r == 0 && options_.follows_order) {
    // This host runs what world rank 0's host runs, once all here announced it.
    if (received_order_ <= d) {
      if (!options_.inter->ReceiveOrder(d, &order_key_)) return false;
      received_order_ = d + 1;
    }
    chosen = FindPending(order_key_);
    for (int q = 1; q < n && chosen != nullptr; ++q) {
      const SharedControl* c = Control(segment_[q]);
      EntryView v;
      if (FindEntry(c, order_key_, c->submitted.value.load(std::memory_order_acquire), &v) < 0) {
        chosen = nullptr;
      }
    }
  } else if (chosen == nullptr && r == 0) {
    chosen = ChooseAnnounced();
  } else if (chosen == nullptr) {
    if (leader->choices.value.load(std::memory_order_acquire) <= d) return false;
    chosen = FindPending(leader->choice[d % kChoiceRing].load(std::memory_order_relaxed));
  }
  if (chosen == nullptr) return false;
  ShmOpState& st = *chosen->state;
  SharedControl* me = Control(segment_[r]);
  if (r == 0) {
    // The ring keeps the last kChoiceRing choices: wait until every member
    // has run the one this overwrites.
    for (int q = 1; q < n; ++q) {
      if (d >= kChoiceRing &&
          Control(segment_[q])->decided.value.load(std::memory_order_acquire) <= d - kChoiceRing) {
        return false;
      }
    }
    me->head.value.store((st.key << 8) | st.entry, std::memory_order_release);
    leader->choice[d % kChoiceRing].store(st.key, std::memory_order_relaxed);
    leader->choices.value.store(d + 1, std::memory_order_release);
    if (options_.inter != nullptr && !options_.follows_order) options_.inter->PublishOrder(d, st.key);
  }
  // Every member's entry for it; they must describe the same call.
  st.peer_entry.assign(n, -1);
  st.peer_entry[r] = st.entry;
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const SharedControl* c = Control(segment_[q]);
    EntryView v;
    int i = chosen == oldest ? peer_entry[q] : -1;
    if (i < 0 || !ReadEntry(c->entries[i], &v) || v.key != st.key) {
      i = FindEntry(c, st.key, c->submitted.value.load(std::memory_order_acquire), &v);
    }
    st.peer_entry[q] = i;
    if (i >= 0 && v.count == chosen->count && v.type == static_cast<uint32_t>(chosen->type) &&
        v.op == static_cast<uint32_t>(chosen->op)) {
      continue;
    }
    if (i < 0) {
      return absl::InternalError(absl::StrCat("ucx: rank ", options_.ranks[q],
                                              " lost its announcement of the all-reduce with tag ",
                                              chosen->user_tag));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "ucx: ranks called different all-reduces with tag ", chosen->user_tag, ": rank ",
        options_.ranks[r], " has ", chosen->count, " elements of ", DataTypeName(chosen->type),
        ", op ", ReduceOpName(chosen->op), "; rank ", options_.ranks[q], " has ", v.count, " elements of ",
        DataTypeName(static_cast<DataType>(v.type)), ", op ",
        ReduceOpName(static_cast<ReduceOp>(v.op))));
  }
  me->head.value.store((st.key << 8) | st.entry, std::memory_order_release);
  st.decision = d;
  if (!st.one_shot) {
    st.first_chunk = next_chunk_;
    next_chunk_ += st.chunks;
  }
  current_ = chosen;
  return true;
}

void ShmAllReduce::Finish(ShmOp* op) {
  ShmOpState& st = *op->state;
  SharedControl* me = Control(segment_[r_]);
  Entry& e = me->entries[st.entry];
  e.word.store(e.word.load(std::memory_order_relaxed) | 2, std::memory_order_release);
  draining_.emplace_back(st.entry, st.decision);
  pending_.remove(op);
  // The next oldest unfinished op heads this rank now.
  const uint64_t head =
      pending_.empty() ? 0 : (pending_.front()->state->key << 8) | pending_.front()->state->entry;
  // Op number first: a reader that sees the new number with the old head
  // (an op it has finished too) does not take it for the next op.
  me->decided.value.store(st.decision + 1, std::memory_order_release);
  me->head.value.store(head, std::memory_order_release);
  current_ = nullptr;
  ++decision_;
}

void ShmAllReduce::Abandon(ShmOp* op) {
  pending_.remove(op);
  if (current_ == op) current_ = nullptr;
  if (options_.inter != nullptr) options_.inter->Abandon(op);
}

std::string ShmAllReduce::Progress() const {
  std::string out = "; shared-memory progress (rank: ops finished, next op's tag):";
  for (int q = 0; q < n_; ++q) {
    const SharedControl* c = Control(segment_[q]);
    const uint64_t head = c->head.value.load(std::memory_order_acquire);
    absl::StrAppend(&out, " ", options_.ranks[q], ": ", c->decided.value.load(std::memory_order_acquire), ", ");
    if (head == 0) {
      absl::StrAppend(&out, "none");
    } else {
      absl::StrAppend(&out, (((head >> 8) - 1) >> 32) & 0xFFFFF);
    }
    absl::StrAppend(&out, q + 1 < n_ ? ";" : "");
  }
  return out;
}


}  // namespace ucx_internal
}  // namespace athanor
