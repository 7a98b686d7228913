// The shared-memory all-reduce of the ucx backend, for communicators whose
// ranks all live on one host.
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
// Nothing here blocks: AdvanceShared moves as far as the peers allow and
// returns; the caller's Wait, Done or the progress thread call it again (so
// a dead peer, seen through its pidfd, and deadlines work as for tag messages).
#include <cstring>
#include <new>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "collectives/blocking_hint.h"
#include "collectives/local_communicator.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/ucx_internal.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {
namespace {

constexpr int kEntries = 128;     // announcement table entries per rank
constexpr int kMaxPending = 64;   // unfinished shared ops per rank
constexpr uint64_t kChoiceRing = 128;

struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
};

// An announced op. word: 0 free, else seq << 2 | finished << 1 | 1, where
// seq numbers the owner's announcements. The owner writes the fields between
// two stores of word; readers use ReadEntry.
struct alignas(64) Entry {
  std::atomic<uint64_t> word{0};
  std::atomic<uint64_t> key{0};
  std::atomic<uint64_t> count{0};
  std::atomic<uint32_t> type{0};
  std::atomic<uint32_t> op{0};
};

struct SharedControl {
  Counter copied;   // chunks whose input this rank has put in its slot
  Counter reduced;  // chunks whose share this rank has reduced into its slot
  Counter done;     // chunks this rank has gathered (it no longer reads them)
  Counter submitted;  // ops this rank has announced (their entries are visible)
  Counter decided;    // ops this rank has finished
  // key << 8 | entry: the op this rank runs as op number `decided` once it
  // has adopted one, else its oldest unfinished op; 0: none.
  Counter head;
  Counter choices;  // rank 0 only: how many ops it has chosen
  alignas(64) std::atomic<uint64_t> choice[kChoiceRing];  // rank 0 only: their keys
  Entry entries[kEntries];
};
constexpr size_t kControlBytes = (sizeof(SharedControl) + 4095) / 4096 * 4096;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

SharedControl* Control(char* segment) { return std::launder(reinterpret_cast<SharedControl*>(segment)); }

struct EntryView {
  uint64_t word = 0, key = 0, count = 0;
  uint32_t type = 0, op = 0;
  bool finished() const { return (word & 2) != 0; }
};

// A consistent copy of an entry; false when it is free.
bool ReadEntry(const Entry& e, EntryView* v) {
  for (;;) {
    const uint64_t w1 = e.word.load(std::memory_order_acquire);
    if (w1 == 0) return false;
    // Acquire loads: the second load of word comes after them, and seeing a
    // field the owner rewrote means seeing the word it cleared before that.
    v->key = e.key.load(std::memory_order_acquire);
    v->count = e.count.load(std::memory_order_acquire);
    v->type = e.type.load(std::memory_order_acquire);
    v->op = e.op.load(std::memory_order_acquire);
    if (e.word.load(std::memory_order_relaxed) == w1) {
      v->word = w1;
      return true;
    }
  }
}

// The entry of `key` in a table (finished or not) among the owner's first
// `submitted` announcements; -1: not among them. With `submitted` read once
// (acquire) before several lookups, finding an op means that every op the
// owner announced earlier is found too.
int FindEntry(const SharedControl* c, uint64_t key, uint64_t submitted, EntryView* v) {
  for (int i = 0; i < kEntries; ++i) {
    if (ReadEntry(c->entries[i], v) && v->key == key && (v->word >> 2) < submitted) return i;
  }
  return -1;
}

// Element range [begin, end) of `share` within a chunk of `len` elements cut
// among `n` ranks; shares start on 64-byte boundaries when len allows.
std::pair<size_t, size_t> Share(size_t len, int n, int share, size_t elem) {
  const size_t align = std::max<size_t>(1, 64 / elem);
  size_t per = (len + n - 1) / n;
  per = (per + align - 1) / align * align;
  const size_t begin = std::min(len, per * share);
  return {begin, std::min(len, begin + per)};
}

// Outputs at least this large are written with non-temporal stores: they
// exceed what the caches keep anyway, and such stores skip reading every
// destination line before overwriting it (a third of the memory traffic).
constexpr size_t kStreamBytes = 8 << 20;

void CopyOut(char* dst, const char* src, size_t bytes, bool stream) {
#if defined(__SSE2__)
  if (stream) {
    size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
    head = std::min(head, bytes);
    std::memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, bytes - i);
    return;
  }
#endif
  (void)stream;
  std::memcpy(dst, src, bytes);
}

// Orders the non-temporal stores before whatever follows (the op's end).
void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace

absl::Status UcxCommunicator::SetUpShared() {
  const int n = options_.world_size, r = options_.rank;
  if (!tuning_.shared_memory || n < 2) return absl::OkStatus();
  shared_chunk_bytes_ = std::max<size_t>(4096, tuning_.shared_chunk_bytes / 4096 * 4096);
  shared_slots_ = static_cast<size_t>(std::max(2, tuning_.shared_slots));
  shared_stage_bytes_ = (tuning_.shared_one_shot_bytes + 63) / 64 * 64;
  // This rank's segment: UCX allocates it where peers can map it (System V
  // or POSIX shared memory, whichever the context has).
  std::string why_not;
  std::string mine;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = kControlBytes + kEntries * shared_stage_bytes_ + shared_slots_ * shared_chunk_bytes_;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucs_status_t s = ucp_mem_map(context_, &mp, &shared_memh_);
  void* rkey_buf = nullptr;
  size_t rkey_len = 0;
  if (s != UCS_OK) {
    shared_memh_ = nullptr;
    why_not = absl::StrCat("ucp_mem_map: ", ucs_status_string(s));
  } else {
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    s = ucp_mem_query(shared_memh_, &attr);
    if (s == UCS_OK) s = ucp_rkey_pack(context_, shared_memh_, &rkey_buf, &rkey_len);
    if (s != UCS_OK) {
      why_not = absl::StrCat("ucp_rkey_pack: ", ucs_status_string(s));
    } else {
      uint64_t address = reinterpret_cast<uint64_t>(attr.address);
      new (attr.address) SharedControl{};
      const uint64_t geometry[4] = {address, shared_chunk_bytes_, shared_slots_, shared_stage_bytes_};
      mine.assign(reinterpret_cast<const char*>(geometry), sizeof(geometry));
      mine.append(static_cast<const char*>(rkey_buf), rkey_len);
      ucp_rkey_buffer_release(rkey_buf);
    }
  }
  // Everyone publishes, even a rank that failed, so nobody waits for it.
  ASSIGN_OR_RETURN(std::vector<std::string> keys,
                   AllGatherThroughStore(store_.get(), "ucx/shm/key", r, n, mine, options_.timeout));
  segment_.assign(n, nullptr);
  shared_rkeys_.assign(n, nullptr);
  for (int q = 0; q < n && why_not.empty(); ++q) {
    uint64_t geometry[4];
    if (keys[q].size() <= sizeof(geometry)) {
      why_not = absl::StrCat("rank ", q, " has no segment");
      break;
    }
    std::memcpy(geometry, keys[q].data(), sizeof(geometry));
    const uint64_t address = geometry[0];
    if (geometry[1] != shared_chunk_bytes_ || geometry[2] != shared_slots_ ||
        geometry[3] != shared_stage_bytes_) {
      why_not = absl::StrCat("rank ", q, " lays out its segment differently (ATHANOR_UCX_SHARED_* differ)");
      break;
    }
    if (q == r) {
      segment_[q] = reinterpret_cast<char*>(address);
      continue;
    }
    s = ucp_ep_rkey_unpack(eps_[q], keys[q].data() + sizeof(geometry), &shared_rkeys_[q]);
    void* local = nullptr;
    if (s == UCS_OK) s = ucp_rkey_ptr(shared_rkeys_[q], address, &local);
    if (s != UCS_OK) {
      why_not = absl::StrCat("rank ", q, "'s segment cannot be mapped here (",
                             ucs_status_string(s), "; UCX_TLS may leave out shared memory)");
      break;
    }
    segment_[q] = static_cast<char*>(local);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> verdicts,
                   AllGatherThroughStore(store_.get(), "ucx/shm/ok", r, n,
                                         why_not.empty() ? "" : why_not, options_.timeout));
  for (int q = 0; q < n && why_not.empty(); ++q) {
    if (!verdicts[q].empty()) why_not = absl::StrCat("on rank ", q, ": ", verdicts[q]);
  }
  shared_on_ = why_not.empty();
  if (r == 0) {
    if (shared_on_) {
      const size_t from = n > 2 ? tuning_.shared_min_bytes
                                : std::max(tuning_.shared_min_bytes, tuning_.small_bytes + 1);
      ATHANOR_LOG(INFO) << "ucx: all " << n << " ranks on this host; all-reduces from " << from
                        << " B go through shared memory (" << shared_slots_ << " slots of "
                        << shared_chunk_bytes_ << " B per rank)";
    } else {
      ATHANOR_LOG(INFO) << "ucx: no shared-memory all-reduce: " << why_not;
    }
  }
  return absl::OkStatus();
}

void UcxCommunicator::TearDownShared() {
  for (ucp_rkey_h& k : shared_rkeys_) {
    if (k != nullptr) ucp_rkey_destroy(k);
    k = nullptr;
  }
  shared_on_ = false;
}

bool UcxCommunicator::UseShared(size_t bytes) const {
  // The same answer on every rank (it depends only on the call), so blocking
  // and async calls of different ranks always pair up.
  return shared_on_ && bytes >= tuning_.shared_min_bytes &&
         (options_.world_size > 2 || bytes > tuning_.small_bytes);
}

std::unique_ptr<Work> UcxCommunicator::SharedAllReduce(const void* send, void* recv, size_t count,
                                                       DataType type, ReduceOp op,
                                                       const CollectiveOptions& options) {
  const size_t elem = DataTypeSize(type);
  const size_t bytes = count * elem;
  const int r = options_.rank;
  auto pending = std::make_shared<PendingOp>();
  pending->type = type;
  pending->op = op;
  pending->kind = "all-reduce";
  pending->user_tag = options.tag;
  pending->deadline = std::chrono::steady_clock::now() + options.timeout;
  auto state = std::make_unique<SharedOpState>();
  state->send = static_cast<const char*>(send);
  state->recv = static_cast<char*>(recv);
  state->count = count;
  const size_t chunk_elems = shared_chunk_bytes_ / elem;
  state->chunks = (count + chunk_elems - 1) / chunk_elems;
  state->one_shot = bytes <= shared_stage_bytes_;
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return MakeDoneWork(error_);
  // Output overlapping the input other than exactly: work in place on the
  // output (a later chunk's input could be overwritten before it is read).
  if (state->send != state->recv && state->send < state->recv + bytes &&
      state->recv < state->send + bytes) {
    std::memmove(state->recv, state->send, bytes);
    state->send = state->recv;
  }
  SharedControl* me = Control(segment_[r]);
  // Entries of ops every rank has finished are free again.
  uint64_t all_decided = ~0ull;
  for (int q = 0; q < options_.world_size; ++q) {
    if (q != r) all_decided = std::min(all_decided, Control(segment_[q])->decided.value.load(std::memory_order_acquire));
  }
  for (size_t i = 0; i < shared_draining_.size();) {
    if (all_decided > shared_draining_[i].second) {
      me->entries[shared_draining_[i].first].word.store(0, std::memory_order_release);
      shared_draining_[i] = shared_draining_.back();
      shared_draining_.pop_back();
    } else {
      ++i;
    }
  }
  int unfinished = 0;
  for (const Entry& e : me->entries) {
    const uint64_t w = e.word.load(std::memory_order_relaxed);
    if (w != 0 && (w & 2) == 0) ++unfinished;
    if (w == 0 && state->entry < 0) state->entry = static_cast<int>(&e - me->entries);
  }
  if (unfinished >= kMaxPending || state->entry < 0) {
    error_ = absl::ResourceExhaustedError(absl::StrCat(
        "ucx: more than ", kMaxPending, " shared-memory all-reduces pending on rank ", r,
        "; wait for some before starting more"));
    return MakeDoneWork(error_);
  }
  // Announce it; a small op is staged whole, so peers can reduce it as soon
  // as it runs.
  const uint64_t tseq = shared_tag_seq_[options.tag]++;
  state->key = (((options.tag & 0xFFFFFull) << 32) | (tseq & 0xFFFFFFFFull)) + 1;
  if (state->one_shot) {
    std::memcpy(segment_[r] + kControlBytes + state->entry * shared_stage_bytes_, state->send, bytes);
  }
  Entry& e = me->entries[state->entry];
  e.word.store(0, std::memory_order_relaxed);
  e.key.store(state->key, std::memory_order_release);
  e.count.store(count, std::memory_order_release);
  e.type.store(static_cast<uint32_t>(type), std::memory_order_release);
  e.op.store(static_cast<uint32_t>(op), std::memory_order_release);
  e.word.store((shared_submitted_++ << 2) | 1, std::memory_order_release);
  me->submitted.value.store(shared_submitted_, std::memory_order_release);
  if (me->head.value.load(std::memory_order_relaxed) == 0) {
    me->head.value.store((state->key << 8) | state->entry, std::memory_order_release);
  }
  pending->shared = std::move(state);
  ops_.push_back(pending);
  num_ops_.store(ops_.size(), std::memory_order_release);
  shared_pending_.fetch_add(1, std::memory_order_acq_rel);
  Advance(pending.get());
  if (!pending->finished && !collectives_internal::InBlockingCall()) WakeLocked();
  return std::make_unique<UcxWork>(this, pending);
}

bool UcxCommunicator::AdoptSharedChoice() {
  const int n = options_.world_size, r = options_.rank;
  const uint64_t d = shared_decision_;
  PendingOp* oldest = nullptr;
  for (const auto& p : ops_) {
    if (p->shared != nullptr && !p->finished) {
      oldest = p.get();
      break;
    }
  }
  if (oldest == nullptr) return false;
  PendingOp* chosen = oldest;
  std::vector<int> peer_entry(n, -1);
  peer_entry[r] = oldest->shared->entry;
  for (int q = 0; q < n && chosen != nullptr; ++q) {
    if (q == r) continue;
    // Rank q is at this same op number, and runs or heads with our oldest.
    const SharedControl* c = Control(segment_[q]);
    const uint64_t before = c->decided.value.load(std::memory_order_acquire);
    const uint64_t head = c->head.value.load(std::memory_order_acquire);
    const uint64_t after = c->decided.value.load(std::memory_order_acquire);
    if (before != d || after != d || (head >> 8) != oldest->shared->key) chosen = nullptr;
    peer_entry[q] = static_cast<int>(head & 0xFF);
  }
  SharedControl* leader = Control(segment_[0]);
  if (chosen == nullptr && r == 0) {
    // One snapshot of every table for the whole search.
    std::vector<uint64_t> submitted(n);
    for (int q = 1; q < n; ++q) {
      submitted[q] = Control(segment_[q])->submitted.value.load(std::memory_order_acquire);
    }
    for (const auto& p : ops_) {
      if (p->shared == nullptr || p->finished) continue;
      bool everyone = true;
      EntryView v;
      for (int q = 1; q < n && everyone; ++q) {
        everyone = FindEntry(Control(segment_[q]), p->shared->key, submitted[q], &v) >= 0;
      }
      if (everyone) {
        chosen = p.get();
        break;
      }
    }
  } else if (chosen == nullptr) {
    if (leader->choices.value.load(std::memory_order_acquire) <= d) return false;
    const uint64_t key = leader->choice[d % kChoiceRing].load(std::memory_order_relaxed);
    for (const auto& p : ops_) {
      if (p->shared != nullptr && !p->finished && p->shared->key == key) chosen = p.get();
    }
  }
  if (chosen == nullptr) return false;
  SharedOpState& st = *chosen->shared;
  SharedControl* me = Control(segment_[r]);
  if (r == 0) {
    // The ring keeps the last kChoiceRing choices: wait until every rank
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
  }
  // Every rank's entry for it; they must describe the same call.
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
    if (i >= 0 && v.count == st.count && v.type == static_cast<uint32_t>(chosen->type) &&
        v.op == static_cast<uint32_t>(chosen->op)) {
      continue;
    }
    error_ = i < 0 ? absl::InternalError(absl::StrCat("ucx: rank ", q, " lost its announcement of the all-reduce with tag ", chosen->user_tag))
                   : absl::InvalidArgumentError(absl::StrCat(
                         "ucx: ranks called different all-reduces with tag ", chosen->user_tag,
                         ": rank ", r, " has ", st.count, " elements of ",
                         DataTypeName(chosen->type), ", op ", ReduceOpName(chosen->op), "; rank ",
                         q, " has ", v.count, " elements of ",
                         DataTypeName(static_cast<DataType>(v.type)), ", op ",
                         ReduceOpName(static_cast<ReduceOp>(v.op))));
    Fail(chosen, error_);
    return false;
  }
  me->head.value.store((st.key << 8) | st.entry, std::memory_order_release);
  st.decision = d;
  if (!st.one_shot) {
    st.first_chunk = shared_next_chunk_;
    shared_next_chunk_ += st.chunks;
  }
  shared_current_ = chosen;
  return true;
}

void UcxCommunicator::FinishShared(PendingOp* op) {
  SharedOpState& st = *op->shared;
  SharedControl* me = Control(segment_[options_.rank]);
  Entry& e = me->entries[st.entry];
  e.word.store(e.word.load(std::memory_order_relaxed) | 2, std::memory_order_release);
  shared_draining_.emplace_back(st.entry, st.decision);
  // The next oldest unfinished op heads this rank now.
  uint64_t head = 0;
  for (const auto& p : ops_) {
    if (p->shared != nullptr && !p->finished && p.get() != op) {
      head = (p->shared->key << 8) | p->shared->entry;
      break;
    }
  }
  // Op number first: a reader that sees the new number with the old head
  // (an op it has finished too) does not take it for the next op.
  me->decided.value.store(st.decision + 1, std::memory_order_release);
  me->head.value.store(head, std::memory_order_release);
  op->finished = true;
  shared_current_ = nullptr;
  ++shared_decision_;
}

std::string UcxCommunicator::SharedProgress() {
  std::string out = "; shared-memory progress (rank: ops finished, next op's tag):";
  for (int q = 0; q < options_.world_size; ++q) {
    const SharedControl* c = Control(segment_[q]);
    const uint64_t head = c->head.value.load(std::memory_order_acquire);
    absl::StrAppend(&out, " ", q, ": ", c->decided.value.load(std::memory_order_acquire), ", ");
    if (head == 0) {
      absl::StrAppend(&out, "none");
    } else {
      absl::StrAppend(&out, (((head >> 8) - 1) >> 32) & 0xFFFFF);
    }
    absl::StrAppend(&out, q + 1 < options_.world_size ? ";" : "");
  }
  return out;
}

void UcxCommunicator::AdvanceShared(PendingOp* op) {
  if (shared_current_ == nullptr && !AdoptSharedChoice()) return;
  if (shared_current_ != op) return;  // another op runs first
  SharedOpState& st = *op->shared;
  const int n = options_.world_size, r = options_.rank;
  const size_t elem = DataTypeSize(op->type);
  if (st.one_shot) {
    auto staged = [&](int q) { return segment_[q] + kControlBytes + st.peer_entry[q] * shared_stage_bytes_; };
    ReduceBuffers(op->type, op->op, st.recv, staged(0), staged(1), st.count);
    for (int q = 2; q < n; ++q) ReduceBuffers(op->type, op->op, st.recv, st.recv, staged(q), st.count);
    if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, st.recv, st.count, n);
    return FinishShared(op);
  }
  const size_t chunk_elems = shared_chunk_bytes_ / elem;
  auto peers_reached = [&](Counter SharedControl::*counter, uint64_t value) {
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      if ((Control(segment_[q])->*counter).value.load(std::memory_order_acquire) < value) return false;
    }
    return true;
  };
  SharedControl* me = Control(segment_[r]);
  const bool stream = st.count * elem >= kStreamBytes;
  const size_t slots_at = kControlBytes + kEntries * shared_stage_bytes_;
  while (st.chunk < st.chunks) {
    const uint64_t g = st.first_chunk + st.chunk;
    const size_t c0 = st.chunk * chunk_elems;
    const size_t len = std::min(chunk_elems, st.count - c0);
    auto slot = [&](int q) { return segment_[q] + slots_at + (g % shared_slots_) * shared_chunk_bytes_; };
    if (st.phase == 0) {
      // Our slot is free once every peer is done with its previous chunk.
      if (g >= shared_slots_ && !peers_reached(&SharedControl::done, g - shared_slots_ + 1)) return;
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        auto [b, e] = Share(len, n, q, elem);
        std::memcpy(slot(r) + b * elem, st.send + (c0 + b) * elem, (e - b) * elem);
      }
      me->copied.value.store(g + 1, std::memory_order_release);
      st.phase = 1;
    }
    if (st.phase == 1) {
      if (!peers_reached(&SharedControl::copied, g + 1)) return;
      auto [b, e] = Share(len, n, r, elem);
      if (e > b) {
        char* dst = slot(r) + b * elem;
        bool first = true;
        for (int q = 0; q < n; ++q) {
          if (q == r) continue;
          const void* a = first ? static_cast<const void*>(st.send + (c0 + b) * elem) : dst;
          ReduceBuffers(op->type, op->op, dst, a, slot(q) + b * elem, e - b);
          first = false;
        }
        if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, dst, e - b, n);
        CopyOut(st.recv + (c0 + b) * elem, dst, (e - b) * elem, stream);
      }
      me->reduced.value.store(g + 1, std::memory_order_release);
      st.phase = 2;
    }
    if (!peers_reached(&SharedControl::reduced, g + 1)) return;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      auto [b, e] = Share(len, n, q, elem);
      CopyOut(st.recv + (c0 + b) * elem, slot(q) + b * elem, (e - b) * elem, stream);
    }
    me->done.value.store(g + 1, std::memory_order_release);
    st.phase = 0;
    ++st.chunk;
  }
  if (stream) StreamFence();
  FinishShared(op);
}

}  // namespace ucx_internal
}  // namespace athanor
