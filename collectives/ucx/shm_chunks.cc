// The chunk pipelines of ShmAllReduce (see shm_all_reduce.cc for the
// protocol): the whole all-reduce on one host (AdvanceFlat, with the staged
// one-shot form for small calls) and the hierarchical one across hosts
// (AdvanceHierarchical). Called under the owner's lock; never blocks.
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/shm_all_reduce.h"
#include "collectives/ucx/shm_op_order.h"
#include "collectives/ucx/shm_segment.h"
#include "collectives/ucx/shm_segments.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

bool ShmAllReduce::Await(Counter SharedControl::*counter, uint64_t value) {
  int lagging = -1;
  if (Reached(segment_, r_, counter, value, &lagging)) return true;
  SharedControl* owner = Control(segment_[lagging]);
  nap_counter_.store(&(owner->*counter).value, std::memory_order_relaxed);
  nap_value_.store(value, std::memory_order_relaxed);
  nap_owner_.store(owner, std::memory_order_release);
  return false;
}

bool ShmAllReduce::Nap(std::chrono::microseconds max) const {
  SharedControl* owner = nap_owner_.load(std::memory_order_acquire);
  if (owner == nullptr) return false;
  // A racing Advance may have moved the target on: then this sleeps on the
  // wrong member at worst until `max`, or returns at once.
  ucx_internal::Nap(owner, nap_counter_.load(std::memory_order_relaxed),
                    nap_value_.load(std::memory_order_relaxed), max);
  return true;
}

absl::StatusOr<bool> ShmAllReduce::Advance(ShmOp* op) {
  nap_owner_.store(nullptr, std::memory_order_relaxed);
  if (order_->current() == nullptr) {
    ASSIGN_OR_RETURN(bool adopted, order_->AdoptChoice());
    if (!adopted) return false;
  }
  if (order_->current() != op) return false;  // another op runs first
  return options_.inter != nullptr ? AdvanceHierarchical(op) : AdvanceFlat(op);
}

absl::StatusOr<bool> ShmAllReduce::AdvanceFlat(ShmOp* op) {
  ShmOpState& st = *op->state;
  const int n = n_, r = r_;
  const size_t elem = DataTypeSize(op->type);
  if (st.one_shot) {
    auto staged = [&](int q) { return segments_->Stage(q, st.peer_entry[q]); };
    ReduceBuffers(op->type, op->op, op->recv, staged(0), staged(1), op->count);
    for (int q = 2; q < n; ++q) ReduceBuffers(op->type, op->op, op->recv, op->recv, staged(q), op->count);
    if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, op->recv, op->count, n);
    order_->Finish(op);
    return true;
  }
  const size_t chunk_elems = st.chunk_elems;
  SharedControl* me = Control(segment_[r]);
  while (st.chunk < st.chunks) {
    const uint64_t g = st.first_chunk + st.chunk;
    const size_t c0 = st.chunk * chunk_elems;
    const size_t len = std::min(chunk_elems, op->count - c0);
    if (st.phase == 0) {
      // Our slot is free once every peer is done with its previous chunk.
      if (g >= slots_ && !Await(&SharedControl::done, g - slots_ + 1)) return false;
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        auto [b, e] = Share(len, n, q, elem);
        std::memcpy(Slot(r, g) + b * elem, st.send + (c0 + b) * elem, (e - b) * elem);
      }
      Publish(me, &SharedControl::copied, g + 1);
      ++moves_;
      st.phase = 1;
    }
    if (st.phase == 1) {
      if (!Await(&SharedControl::copied, g + 1)) return false;
      auto [b, e] = Share(len, n, r, elem);
      if (e > b) {
        char* dst = Slot(r, g) + b * elem;
        bool first = true;
        for (int q = 0; q < n; ++q) {
          if (q == r) continue;
          const void* a = first ? static_cast<const void*>(st.send + (c0 + b) * elem) : dst;
          ReduceBuffers(op->type, op->op, dst, a, Slot(q, g) + b * elem, e - b);
          first = false;
        }
        if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, dst, e - b, n);
        CopyOut(op->recv + (c0 + b) * elem, dst, (e - b) * elem, st.stream);
      }
      Publish(me, &SharedControl::reduced, g + 1);
      ++moves_;
      st.phase = 2;
    }
    if (!Await(&SharedControl::reduced, g + 1)) return false;
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      auto [b, e] = Share(len, n, q, elem);
      CopyOut(op->recv + (c0 + b) * elem, Slot(q, g) + b * elem, (e - b) * elem, st.stream);
    }
    Publish(me, &SharedControl::done, g + 1);
    ++moves_;
    st.phase = 0;
    ++st.chunk;
  }
  if (st.stream) StreamFence();
  order_->Finish(op);
  return true;
}

absl::StatusOr<bool> ShmAllReduce::AdvanceHierarchical(ShmOp* op) {
  ShmOpState& st = *op->state;
  const int n = n_, r = r_;
  const size_t elem = DataTypeSize(op->type);
  const size_t chunk_elems = st.chunk_elems;
  SharedControl* me = Control(segment_[r]);
  auto length = [&](size_t c) { return std::min(chunk_elems, op->count - c * chunk_elems); };
  for (bool moved = true; moved;) {
    moved = false;
    // The oldest chunk in flight: its exchange between hosts, then the gather.
    if (st.back < st.chunk) {
      const uint64_t g = st.first_chunk + st.back;
      const size_t c0 = st.back * chunk_elems, len = length(st.back);
      if (st.back_phase == 0) {
        ASSIGN_OR_RETURN(bool exchanged, options_.inter->Finish(op, st.back));
        if (exchanged) {
          times_.exchange += Since(st.exchange_started[st.back % slots_]);
          const auto t0 = std::chrono::steady_clock::now();
          for (int b = r; b < blocks_; b += n) {
            auto [lo, hi] = Share(len, blocks_, b, elem);
            if (hi == lo) continue;
            char* data = Slot(r, g) + lo * elem;
            if (op->op == ReduceOp::kAvg) ScaleForAvg(op->type, data, hi - lo, options_.world_size);
            CopyOut(op->recv + (c0 + lo) * elem, data, (hi - lo) * elem, st.stream);
          }
          me->reduced.value.store(g + 1, std::memory_order_release);
          times_.out += Since(t0);
          st.back_phase = 1;
          moved = true;
        }
      }
      if (st.back_phase == 1 && Reached(segment_, r, &SharedControl::reduced, g + 1)) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int b = 0; b < blocks_; ++b) {
          if (Owns(b)) continue;
          auto [lo, hi] = Share(len, blocks_, b, elem);
          CopyOut(op->recv + (c0 + lo) * elem, Slot(b % n, g) + lo * elem, (hi - lo) * elem,
                  st.stream);
        }
        me->done.value.store(g + 1, std::memory_order_release);
        times_.out += Since(t0);
        ++st.back;
        st.back_phase = 0;
        moved = true;
      }
    }
    // The next chunk: copy, reduce on this host, start its exchange. Up to
    // `slots` chunks in flight (its slot is then free on every member).
    if (st.chunk < st.chunks && st.chunk - st.back < slots_) {
      const uint64_t g = st.first_chunk + st.chunk;
      const size_t c0 = st.chunk * chunk_elems, len = length(st.chunk);
      if (st.phase == 0 && (g < slots_ || Reached(segment_, r, &SharedControl::done, g - slots_ + 1))) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int b = 0; b < blocks_; ++b) {
          if (Owns(b)) continue;
          auto [lo, hi] = Share(len, blocks_, b, elem);
          std::memcpy(Slot(r, g) + lo * elem, st.send + (c0 + lo) * elem, (hi - lo) * elem);
        }
        me->copied.value.store(g + 1, std::memory_order_release);
        times_.local += Since(t0);
        st.phase = 1;
        moved = true;
      }
      if (st.phase == 1 && Reached(segment_, r, &SharedControl::copied, g + 1)) {
        const auto t0 = std::chrono::steady_clock::now();
        st.exchange_started[st.chunk % slots_] = t0;
        for (int b = r; b < blocks_; b += n) {
          auto [lo, hi] = Share(len, blocks_, b, elem);
          if (hi == lo) continue;
          char* dst = Slot(r, g) + lo * elem;
          const char* own = st.send + (c0 + lo) * elem;
          if (n == 1) std::memcpy(dst, own, (hi - lo) * elem);
          bool first = true;
          for (int q = 0; q < n; ++q) {
            if (q == r) continue;
            ReduceBuffers(op->type, op->op, dst, first ? own : dst, Slot(q, g) + lo * elem, hi - lo);
            first = false;
          }
          RETURN_IF_ERROR(options_.inter->Start(op, st.chunk, b, dst, hi - lo));
        }
        times_.local += Since(t0);
        st.phase = 0;
        ++st.chunk;
        moved = true;
      }
    }
  }
  if (st.back < st.chunks) return false;
  if (st.stream) StreamFence();
  ++times_.ops;
  times_.wall += Since(st.submitted);
  order_->Finish(op);
  return true;
}

}  // namespace ucx_internal
}  // namespace athanor
