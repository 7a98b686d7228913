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
// A segment is a control page (three progress counters and a description of
// the running op) and `slots` chunk-sized slots. The message is cut into
// chunks; a chunk's elements are cut into one share per rank. For each chunk
// (numbered globally over the communicator's life, so slot = chunk % slots):
//   0. copy:   rank r copies every share but its own of its input into its
//              slot, then publishes copied = chunk + 1;
//   1. reduce: once every peer has copied, r reduces its own share of its
//              input with the same share of every peer's slot into its own
//              slot (the share nobody else writes), scales it for avg, copies
//              it to the output, then publishes reduced = chunk + 1;
//   2. gather: once every peer has reduced, r copies each peer's share from
//              that peer's slot to its output, then publishes done = chunk + 1.
// Small ops (UcxTuning::shared_one_shot_bytes) skip the shares: each rank
// copies its whole input in, and once every rank has, each reduces the whole
// chunk from all slots in rank order and is done: one wait instead of two.
// A slot is reused for chunk + slots only once every peer is done with chunk,
// so with several slots a rank copies ahead while its peers still gather.
// Each counter is written by one rank only (release) and read by the others
// (acquire).
//
// Which op runs: calls with different tags may be issued in different
// orders on different ranks (ucx_communicator.h), so submission order cannot
// decide. Each rank announces its pending shared ops (tag and per-tag
// sequence number) in its control page; rank 0 picks, among its own pending
// ops in submission order, the first that every rank has announced, and
// publishes its choice; every rank runs rank 0's choices one after another.
// The first chunk of an op checks that every rank describes the same call
// (count, type, op) and fails with a clear error otherwise.
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

constexpr size_t kControlBytes = 4096;

struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
};

// A pending shared op, as its rank announces it; key 0: a free entry.
struct Announcement {
  std::atomic<uint64_t> key{0};
  uint64_t count = 0;
  uint32_t type = 0, op = 0;
};
constexpr int kMaxAnnounced = 64;  // shared ops one rank may have pending
constexpr uint64_t kChoiceRing = 4;

// The control page at the start of every segment.
struct SharedControl {
  Counter copied;   // chunks whose input this rank has put in its slot
  Counter reduced;  // chunks whose share this rank has reduced into its slot
  Counter done;     // chunks this rank has gathered (it no longer reads them)
  Counter choices;  // rank 0 only: how many ops it has chosen
  alignas(64) std::atomic<uint64_t> choice[kChoiceRing]{};  // rank 0 only: their keys
  // The op this rank runs, written before its first `copied`.
  alignas(64) uint64_t op_key;
  uint64_t op_count;
  uint32_t op_type;
  uint32_t op_op;
  alignas(64) Announcement announced[kMaxAnnounced];
};
static_assert(sizeof(SharedControl) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

SharedControl* Control(char* segment) { return std::launder(reinterpret_cast<SharedControl*>(segment)); }

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
  // This rank's segment: UCX allocates it where peers can map it (System V
  // or POSIX shared memory, whichever the context has).
  std::string why_not;
  std::string mine;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = kControlBytes + shared_slots_ * shared_chunk_bytes_;
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
      mine.assign(reinterpret_cast<const char*>(&address), sizeof(address));
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
    if (keys[q].size() <= sizeof(uint64_t)) {
      why_not = absl::StrCat("rank ", q, " has no segment");
      break;
    }
    uint64_t address;
    std::memcpy(&address, keys[q].data(), sizeof(address));
    if (q == r) {
      segment_[q] = reinterpret_cast<char*>(address);
      continue;
    }
    s = ucp_ep_rkey_unpack(eps_[q], keys[q].data() + sizeof(address), &shared_rkeys_[q]);
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
  state->one_shot = bytes <= tuning_.shared_one_shot_bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return MakeDoneWork(error_);
  // Output overlapping the input other than exactly: work in place on the
  // output (a later chunk's input could be overwritten before it is read).
  if (state->send != state->recv && state->send < state->recv + bytes &&
      state->recv < state->send + bytes) {
    std::memmove(state->recv, state->send, bytes);
    state->send = state->recv;
  }
  // Announce it, so rank 0 can choose it once every rank has.
  SharedControl* me = Control(segment_[options_.rank]);
  for (int i = 0; i < kMaxAnnounced && state->announce < 0; ++i) {
    if (me->announced[i].key.load(std::memory_order_relaxed) == 0) state->announce = i;
  }
  if (state->announce < 0) {
    error_ = absl::ResourceExhaustedError(absl::StrCat(
        "ucx: more than ", kMaxAnnounced, " shared-memory all-reduces pending on rank ",
        options_.rank, "; wait for some before starting more"));
    return MakeDoneWork(error_);
  }
  const uint64_t tseq = shared_tag_seq_[options.tag]++;
  state->key = (((options.tag & 0xFFFFFull) << 40) | (tseq & ((1ull << 40) - 1))) + 1;
  Announcement& a = me->announced[state->announce];
  a.count = count;
  a.type = static_cast<uint32_t>(type);
  a.op = static_cast<uint32_t>(op);
  a.key.store(state->key, std::memory_order_release);
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
  SharedControl* leader = Control(segment_[0]);
  const uint64_t d = shared_decision_;
  PendingOp* chosen = nullptr;
  if (r == 0) {
    auto announced_by = [&](int q, uint64_t key) {
      const SharedControl* c = Control(segment_[q]);
      for (const Announcement& a : c->announced) {
        if (a.key.load(std::memory_order_acquire) == key) return true;
      }
      return false;
    };
    for (const auto& p : ops_) {
      if (p->shared == nullptr || p->finished) continue;
      bool everyone = true;
      for (int q = 1; q < n && everyone; ++q) everyone = announced_by(q, p->shared->key);
      if (everyone) {
        chosen = p.get();
        break;
      }
    }
    if (chosen == nullptr) return false;
    leader->choice[d % kChoiceRing].store(chosen->shared->key, std::memory_order_relaxed);
    leader->choices.value.store(d + 1, std::memory_order_release);
  } else {
    if (leader->choices.value.load(std::memory_order_acquire) <= d) return false;
    const uint64_t key = leader->choice[d % kChoiceRing].load(std::memory_order_relaxed);
    for (const auto& p : ops_) {
      if (p->shared != nullptr && !p->finished && p->shared->key == key) chosen = p.get();
    }
    // Rank 0 chooses only what every rank announced, so it is here.
    if (chosen == nullptr) return false;
  }
  SharedOpState& st = *chosen->shared;
  st.running = true;
  st.first_chunk = shared_next_chunk_;
  shared_next_chunk_ += st.chunks;
  shared_current_ = chosen;
  return true;
}

void UcxCommunicator::AdvanceShared(PendingOp* op) {
  if (shared_current_ == nullptr && !AdoptSharedChoice()) return;
  if (shared_current_ != op) return;  // another op runs first
  SharedOpState& st = *op->shared;
  const int n = options_.world_size, r = options_.rank;
  const size_t elem = DataTypeSize(op->type);
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
  while (st.chunk < st.chunks) {
    const uint64_t g = st.first_chunk + st.chunk;
    const size_t c0 = st.chunk * chunk_elems;
    const size_t len = std::min(chunk_elems, st.count - c0);
    auto slot = [&](int q) {
      return segment_[q] + kControlBytes + (g % shared_slots_) * shared_chunk_bytes_;
    };
    if (st.phase == 0) {
      // Our slot is free once every peer is done with its previous chunk.
      if (g >= shared_slots_ && !peers_reached(&SharedControl::done, g - shared_slots_ + 1)) return;
      if (st.chunk == 0) {
        me->op_key = st.key;
        me->op_count = st.count;
        me->op_type = static_cast<uint32_t>(op->type);
        me->op_op = static_cast<uint32_t>(op->op);
      }
      if (st.one_shot) {
        std::memcpy(slot(r), st.send + c0 * elem, len * elem);
      } else {
        for (int q = 0; q < n; ++q) {
          if (q == r) continue;
          auto [b, e] = Share(len, n, q, elem);
          std::memcpy(slot(r) + b * elem, st.send + (c0 + b) * elem, (e - b) * elem);
        }
      }
      me->copied.value.store(g + 1, std::memory_order_release);
      st.phase = 1;
    }
    if (st.phase == 1) {
      if (!peers_reached(&SharedControl::copied, g + 1)) return;
      if (st.chunk == 0) {
        for (int q = 0; q < n; ++q) {
          const SharedControl* c = Control(segment_[q]);
          if (c->op_key == st.key && c->op_count == st.count &&
              c->op_type == static_cast<uint32_t>(op->type) &&
              c->op_op == static_cast<uint32_t>(op->op)) {
            continue;
          }
          error_ = absl::InvalidArgumentError(absl::StrCat(
              "ucx: ranks called different all-reduces with tag ", op->user_tag, ": rank ", r,
              " has ", st.count, " elements of ", DataTypeName(op->type), ", op ",
              ReduceOpName(op->op), "; rank ", q, " has ", c->op_count, " elements of ",
              DataTypeName(static_cast<DataType>(c->op_type)), ", op ",
              ReduceOpName(static_cast<ReduceOp>(c->op_op))));
          return Fail(op, error_);
        }
      }
      if (st.one_shot) {
        // Every rank reduces the whole chunk, in rank order, so all get the
        // same bits; no gather phase.
        char* out = st.recv + c0 * elem;
        ReduceBuffers(op->type, op->op, out, slot(0), slot(1), len);
        for (int q = 2; q < n; ++q) ReduceBuffers(op->type, op->op, out, out, slot(q), len);
        if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, out, len, n);
        me->done.value.store(g + 1, std::memory_order_release);
        st.phase = 0;
        ++st.chunk;
        continue;
      }
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
  me->announced[st.announce].key.store(0, std::memory_order_release);
  op->finished = true;
  shared_current_ = nullptr;
  ++shared_decision_;
}

}  // namespace ucx_internal
}  // namespace athanor
