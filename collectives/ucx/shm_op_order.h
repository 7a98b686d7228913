// ShmOpOrder: which op the members of a ShmAllReduce run next. It owns this
// member's announcement table (in its segment's control area, shm_segment.h),
// the ops announced and not finished, and the agreement on the one order in
// which every member runs them ("decisions"); the protocol is described in
// shm_op_order.cc. ShmAllReduce runs the chunks of the op it picks
// (shm_chunks.cc).
//
// Thread model: not thread-safe. Its owner (ShmAllReduce) calls it under the
// owner's lock (the OpEngine's); nothing here blocks or calls back, except
// into InterHost for the order between hosts, under that same lock.
// Ownership: the segments and the InterHost are not owned and outlive this;
// ShmOp objects belong to the caller and must outlive their Announce ..
// Finish/Abandon span.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {
namespace ucx_internal {

struct ShmOp;
struct ShmOpState;
struct SharedControl;
class ShmSegments;
class InterHost;

class ShmOpOrder {
 public:
  // `segments`: every member's, mapped here; `ranks`: by member, the
  // member's rank in the communicator (for messages); `index`: ours.
  // `follows_order`: this host runs the order of another host, received
  // through `inter` (null: one host).
  ShmOpOrder(const ShmSegments* segments, std::vector<int> ranks, int index, bool follows_order,
             InterHost* inter);
  ShmOpOrder(const ShmOpOrder&) = delete;
  ShmOpOrder& operator=(const ShmOpOrder&) = delete;

  // Announces `op` (its send, count, type, op and user tag set) with its
  // chunking already worked out in `state`: takes a free table entry, stages
  // a one-shot op's input into it, publishes it, and hands `state` to
  // `op->state`. Errors: ResourceExhausted with too many ops pending (then
  // `op` is left as it was).
  absl::Status Announce(ShmOp* op, std::unique_ptr<ShmOpState> state);
  // The op every member runs now; null until AdoptChoice finds it.
  ShmOp* current() const { return current_; }
  // Sets current() to the op every member runs next, if known yet (true).
  // Errors: the members' announcements of it disagree (InvalidArgument) or
  // one is gone (Internal).
  absl::StatusOr<bool> AdoptChoice();
  // current() is finished on this member: frees its entry once every member
  // is done with it, and heads with the next.
  void Finish(ShmOp* op);
  // `op` ends with an error elsewhere: forgets it.
  void Abandon(ShmOp* op);
  // Where every member stands, for timeout messages.
  std::string Progress() const;

 private:
  SharedControl* ControlOf(int q) const;
  void FreeDrainedEntries();
  // Rank 0's pick among the ops every member has announced; null: none yet.
  ShmOp* ChooseAnnounced() const;
  ShmOp* FindPending(uint64_t key) const;

  // Constant after construction.
  const ShmSegments* const segments_;
  const std::vector<int> ranks_;
  const int n_, r_;
  const bool follows_order_;
  InterHost* const inter_;

  // Op state (the owner's lock).
  std::map<uint64_t, uint64_t> tag_seq_;  // next per tag
  uint64_t submitted_ = 0;  // ops this rank announced
  uint64_t decision_ = 0;   // ops this rank finished
  ShmOp* current_ = nullptr;
  uint64_t next_chunk_ = 0;  // global number of the next op's first chunk
  // Entries of finished ops that peers may still read: (entry, decision).
  std::vector<std::pair<int, uint64_t>> draining_;
  std::list<ShmOp*> pending_;  // announced and unfinished, in submission order
  uint64_t received_order_ = 0;  // follows_order: decisions received so far
  uint64_t order_key_ = 0;       // ... the key of decision received_order_ - 1
};

}  // namespace ucx_internal
}  // namespace athanor
