// The layout of a ShmAllReduce segment and the helpers the parts of its
// implementation use (shm_all_reduce.cc: set-up; shm_op_order.cc:
// announcements and op order; shm_chunks.cc: the chunk pipelines). Internal
// to collectives/ucx; see shm_all_reduce.cc and shm_op_order.cc for the
// protocol.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace athanor {
namespace ucx_internal {

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
  // Napping (see Publish and Nap): peers asleep on this rank's counters, and
  // the futex word they sleep on, bumped by a publish that finds one.
  alignas(64) std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> wake{0};
  alignas(64) std::atomic<uint64_t> choice[kChoiceRing];  // rank 0 only: their keys
  Entry entries[kEntries];
};
constexpr size_t kControlBytes = (sizeof(SharedControl) + 4095) / 4096 * 4096;
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline SharedControl* Control(char* segment) { return std::launder(reinterpret_cast<SharedControl*>(segment)); }

struct EntryView {
  uint64_t word = 0, key = 0, count = 0;
  uint32_t type = 0, op = 0;
  bool finished() const { return (word & 2) != 0; }
};

// A consistent copy of an entry; false when it is free.
inline bool ReadEntry(const Entry& e, EntryView* v) {
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
inline int FindEntry(const SharedControl* c, uint64_t key, uint64_t submitted, EntryView* v) {
  for (int i = 0; i < kEntries; ++i) {
    if (ReadEntry(c->entries[i], v) && v->key == key && (v->word >> 2) < submitted) return i;
  }
  return -1;
}

// Element range [begin, end) of `share` within a chunk of `len` elements cut
// among `n` ranks; shares start on 64-byte boundaries when len allows.
inline std::pair<size_t, size_t> Share(size_t len, int n, int share, size_t elem) {
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

inline void CopyOut(char* dst, const char* src, size_t bytes, bool stream) {
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
inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}


// Which counter of the control area a wait is on.
using CounterField = Counter SharedControl::*;


// Whether every member but `self` has brought `counter` to `value`; if not,
// *lagging (when given) is the first member that has not.
inline bool Reached(const std::vector<char*>& segment, int self, CounterField counter,
                    uint64_t value, int* lagging = nullptr) {
  for (int q = 0; q < static_cast<int>(segment.size()); ++q) {
    if (q == self) continue;
    if ((Control(segment[q])->*counter).value.load(std::memory_order_acquire) < value) {
      if (lagging != nullptr) *lagging = q;
      return false;
    }
  }
  return true;
}

// Why ranks nap instead of spinning: on a host with as many cores as ranks,
// a rank that spins (or sched_yields, which only yields to its own core's
// queue) while its peer shares a core with some other thread holds a whole
// core for nothing, and the pair runs at the starved peer's pace. A rank
// asleep in the kernel frees its core, so the scheduler can move the peer
// (or the other thread) onto it. docs/benchmarks.md, "One-host steadiness".
//
// The futex word lives in the segment (shared memory): the syscalls are the
// shared (not private) kind, keyed by the page, so they work between
// processes mapping it at different addresses.
inline void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Sets one of this rank's counters and wakes the peers napping on it.
inline void Publish(SharedControl* me, CounterField counter, uint64_t value) {
  (me->*counter).value.store(value, std::memory_order_release);
  // Pairs with the fence in Nap: either the napper sees the value, or this
  // sees the napper (and bumps the word it sleeps on).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (me->sleepers.load(std::memory_order_relaxed) != 0) {
    me->wake.fetch_add(1, std::memory_order_release);
    FutexWake(&me->wake);
  }
}

// Sleeps until `owner` publishes, at most `max`, unless `counter` (one of
// owner's) already reached `value`.
inline void Nap(SharedControl* owner, const std::atomic<uint64_t>* counter, uint64_t value,
                std::chrono::microseconds max) {
  const uint32_t seen = owner->wake.load(std::memory_order_acquire);
  owner->sleepers.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (counter->load(std::memory_order_acquire) < value) {
    timespec ts{static_cast<time_t>(max.count() / 1000000), static_cast<long>(max.count() % 1000000) * 1000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&owner->wake), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  owner->sleepers.fetch_sub(1, std::memory_order_relaxed);
}

inline double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct ShmOpState {
  const char* send = nullptr;  // == recv when the call overlapped partially
  uint64_t key = 0;            // tag and per-tag sequence number, plus one
  int entry = -1;              // its entry in this rank's announcement table
  bool one_shot = false;       // staged whole at submission; every rank reduces all of it
  bool stream = false;         // outputs written with non-temporal stores
  std::vector<int> peer_entry;  // once running: its entry in each member's table
  uint64_t decision = 0;     // once running: its place in the order all members run
  uint64_t first_chunk = 0;  // once running: global number of its first chunk
  size_t chunk_elems = 0;  // elements per chunk (at most a slot's worth)
  size_t chunks = 0;
  size_t chunk = 0;  // next chunk to copy and reduce
  int phase = 0;     // of that chunk: 0 copy in, 1 reduce (flat: 2 gather)
  size_t back = 0;     // across hosts: oldest chunk not yet gathered
  int back_phase = 0;  // of that chunk: 0 exchange, 1 gather
  // Across hosts, for PhaseTimes: when submitted, and when each chunk in
  // flight started its exchange (by chunk % slots).
  std::chrono::steady_clock::time_point submitted;
  std::vector<std::chrono::steady_clock::time_point> exchange_started;
};


}  // namespace ucx_internal
}  // namespace athanor
