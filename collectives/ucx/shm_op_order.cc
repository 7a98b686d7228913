// The order in which the members of a ShmAllReduce run their ops
// (ShmOpOrder, see shm_op_order.h), and the announcement table it rests on.
// shm_all_reduce.cc describes the all-reduce itself.
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
// An entry is reused once every rank has finished its op (`decided`); a
// small op's input is staged in its entry's buffer before the entry is
// published, so a peer that sees the op may read it.
//
// Across hosts, every host runs the ops in the order world rank 0's host agrees on: rank 0
// sends the key of each op it adopts to the other hosts' leaders, who choose
// it for their host once every member there has announced it (the fast
// path, every member headed by the same op, is for rank 0's host only).
#include "collectives/ucx/shm_op_order.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/ucx/shm_all_reduce.h"
#include "collectives/ucx/shm_segment.h"
#include "collectives/ucx/shm_segments.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

ShmOpOrder::ShmOpOrder(const ShmSegments* segments, std::vector<int> ranks, int index,
                       bool follows_order, InterHost* inter)
    : segments_(segments),
      ranks_(std::move(ranks)),
      n_(static_cast<int>(ranks_.size())),
      r_(index),
      follows_order_(follows_order),
      inter_(inter) {}

SharedControl* ShmOpOrder::ControlOf(int q) const { return Control(segments_->all()[q]); }

void ShmOpOrder::FreeDrainedEntries() {
  SharedControl* me = ControlOf(r_);
  // Entries of ops every member has finished are free again.
  uint64_t all_decided = ~0ull;
  for (int q = 0; q < n_; ++q) {
    if (q != r_) {
      all_decided = std::min(all_decided,
                             ControlOf(q)->decided.value.load(std::memory_order_acquire));
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

absl::Status ShmOpOrder::Announce(ShmOp* op, std::unique_ptr<ShmOpState> state) {
  const size_t bytes = op->count * DataTypeSize(op->type);
  FreeDrainedEntries();
  SharedControl* me = ControlOf(r_);
  int unfinished = 0;
  for (const Entry& e : me->entries) {
    const uint64_t w = e.word.load(std::memory_order_relaxed);
    if (w != 0 && (w & 2) == 0) ++unfinished;
    if (w == 0 && state->entry < 0) state->entry = static_cast<int>(&e - me->entries);
  }
  if (unfinished >= kMaxPending || state->entry < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ucx: more than ", kMaxPending, " shared-memory all-reduces pending on rank ",
        ranks_[r_],
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

ShmOp* ShmOpOrder::FindPending(uint64_t key) const {
  for (ShmOp* p : pending_) {
    if (p->state->key == key) return p;
  }
  return nullptr;
}

ShmOp* ShmOpOrder::ChooseAnnounced() const {
  // One snapshot of every table for the whole search.
  std::vector<uint64_t> submitted(n_);
  for (int q = 0; q < n_; ++q) {
    if (q != r_) submitted[q] = ControlOf(q)->submitted.value.load(std::memory_order_acquire);
  }
  for (ShmOp* p : pending_) {
    bool everyone = true;
    EntryView v;
    for (int q = 0; q < n_ && everyone; ++q) {
      if (q != r_) everyone = FindEntry(ControlOf(q), p->state->key, submitted[q], &v) >= 0;
    }
    if (everyone) return p;
  }
  return nullptr;
}

absl::StatusOr<bool> ShmOpOrder::AdoptChoice() {
  const int n = n_, r = r_;
  const uint64_t d = decision_;
  if (pending_.empty()) return false;
  ShmOp* oldest = pending_.front();
  ShmOp* chosen = nullptr;
  std::vector<int> peer_entry(n, -1);
  peer_entry[r] = oldest->state->entry;
  if (!follows_order_) {
    chosen = oldest;
    for (int q = 0; q < n && chosen != nullptr; ++q) {
      if (q == r) continue;
      // Member q is at this same op number, and runs or heads with our oldest.
      const SharedControl* c = ControlOf(q);
      const uint64_t before = c->decided.value.load(std::memory_order_acquire);
      const uint64_t head = c->head.value.load(std::memory_order_acquire);
      const uint64_t after = c->decided.value.load(std::memory_order_acquire);
      if (before != d || after != d || (head >> 8) != oldest->state->key) chosen = nullptr;
      peer_entry[q] = static_cast<int>(head & 0xFF);
    }
  }
  SharedControl* leader = ControlOf(0);
  if (chosen == nullptr && r == 0 && follows_order_) {
    // This host runs what world rank 0's host runs, once all here announced it.
    if (received_order_ <= d) {
      if (!inter_->ReceiveOrder(d, &order_key_)) return false;
      received_order_ = d + 1;
    }
    chosen = FindPending(order_key_);
    for (int q = 1; q < n && chosen != nullptr; ++q) {
      const SharedControl* c = ControlOf(q);
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
  SharedControl* me = ControlOf(r);
  if (r == 0) {
    // The ring keeps the last kChoiceRing choices: wait until every member
    // has run the one this overwrites.
    for (int q = 1; q < n; ++q) {
      if (d >= kChoiceRing &&
          ControlOf(q)->decided.value.load(std::memory_order_acquire) <= d - kChoiceRing) {
        return false;
      }
    }
    me->head.value.store((st.key << 8) | st.entry, std::memory_order_release);
    leader->choice[d % kChoiceRing].store(st.key, std::memory_order_relaxed);
    leader->choices.value.store(d + 1, std::memory_order_release);
    if (inter_ != nullptr && !follows_order_) inter_->PublishOrder(d, st.key);
  }
  // Every member's entry for it; they must describe the same call.
  st.peer_entry.assign(n, -1);
  st.peer_entry[r] = st.entry;
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const SharedControl* c = ControlOf(q);
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
      return absl::InternalError(absl::StrCat("ucx: rank ", ranks_[q],
                                              " lost its announcement of the all-reduce with tag ",
                                              chosen->user_tag));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "ucx: ranks called different all-reduces with tag ", chosen->user_tag, ": rank ",
        ranks_[r], " has ", chosen->count, " elements of ", DataTypeName(chosen->type),
        ", op ", ReduceOpName(chosen->op), "; rank ", ranks_[q], " has ", v.count, " elements of ",
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

void ShmOpOrder::Finish(ShmOp* op) {
  ShmOpState& st = *op->state;
  SharedControl* me = ControlOf(r_);
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

void ShmOpOrder::Abandon(ShmOp* op) {
  pending_.remove(op);
  if (current_ == op) current_ = nullptr;
}

std::string ShmOpOrder::Progress() const {
  std::string out = "; shared-memory progress (rank: ops finished, next op's tag):";
  for (int q = 0; q < n_; ++q) {
    const SharedControl* c = ControlOf(q);
    const uint64_t head = c->head.value.load(std::memory_order_acquire);
    absl::StrAppend(&out, " ", ranks_[q], ": ", c->decided.value.load(std::memory_order_acquire), ", ");
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
