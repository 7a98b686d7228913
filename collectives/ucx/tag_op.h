// TagOp: one schedule (schedule.h) of tag messages in flight, as the
// OpEngine runs it: posts each chain's steps (up to the path's window of
// chains at once), reacts to completions, reduces, and names the peer when
// a transfer fails.
//
// Thread model: everything under the engine's lock, UCX's completion
// callbacks included (they run inside ucp_worker_progress). Ownership: the
// path outlives its ops; the buffers the schedule names belong to the
// caller (or to the path's scratch, handed back in Release).
#pragma once

#include <vector>

#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/schedule.h"

namespace athanor {
namespace ucx_internal {

class TagOp;
class TagSchedulePath;

// Run-time state of one chain of a schedule.
struct ChainState {
  TagOp* op = nullptr;
  size_t index = 0;
  size_t step = 0;
  bool started = false;
  bool done = false;
  int pending = 0;  // requests of the current step still in flight
  void* send_req = nullptr;
  void* recv_req = nullptr;
  ucs_status_t error = UCS_OK;
};

class TagOp final : public PendingOp {
 public:
  TagOp(TagSchedulePath* path, const char* kind, DataType type, ReduceOp op,
        const CollectiveOptions& options)
      : PendingOp(kind, options), path_(path), type_(type), op_(op) {}

  // Set up before the engine takes it in.
  void Start(Schedule schedule, uint64_t tag_base, char* scratch, size_t scratch_bytes);

  void Advance(OpEngine* engine) override;
  void Cancel(ucp_worker_h worker) override;
  size_t outstanding() const override { return outstanding_; }
  void Release() override;

  // UCX completion callbacks; user_data is the ChainState.
  static void SendDone(void* request, ucs_status_t status, void* user_data);
  static void RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                       void* user_data);

 private:
  bool PostStep(OpEngine* engine, ChainState* cs);
  void FinishStep(OpEngine* engine, ChainState* cs);

  TagSchedulePath* const path_;
  const DataType type_;
  const ReduceOp op_;
  Schedule schedule_;
  std::vector<ChainState> chains_;
  uint64_t tag_base_ = 0;  // user tag and sequence bits
  size_t next_chain_ = 0;
  size_t low_chain_ = 0;  // every chain below this one is done
  size_t outstanding_ = 0;
  char* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace ucx_internal
}  // namespace athanor
