// The 2-rank small all-reduce fast path of a blocking call: one send and one
// receive into a kept buffer, progressed on the caller's thread, then one
// reduce. No schedule, PendingOp or scratch lookup per call. It uses the tags
// and message of RecursiveDoublingAllReduce's single 2-rank step (chain 0,
// msg 1), so it pairs with a peer that runs the generic path (an async call).
#include <cstring>

#include "collectives/local_communicator.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/tag_schedule_path.h"

namespace athanor {
namespace ucx_internal {
namespace {

// A request pointer from a *_nbx call with no callback: done when null or no
// longer in progress. Frees it once done; keeps its status in *status.
bool Settle(ucs_status_ptr_t* req, ucs_status_t* status) {
  if (*req == nullptr) return true;
  ucs_status_t s = ucp_request_check_status(*req);
  if (s == UCS_INPROGRESS) return false;
  ucp_request_free(*req);
  *req = nullptr;
  if (s != UCS_OK && *status == UCS_OK) *status = s;
  return true;
}

}  // namespace

std::unique_ptr<Work> TagSchedulePath::PairAllReduce(const void* send, void* recv, size_t count,
                                                     DataType type, ReduceOp op,
                                                     const CollectiveOptions& options) {
  const size_t bytes = count * DataTypeSize(type);
  const char* s = static_cast<const char*>(send);
  const char* d = static_cast<const char*>(recv);
  if (s != d && s < d + bytes && d < s + bytes) return nullptr;  // partial overlap
  const int peer = 1 - rank_;
  const auto& on_done = engine_->options().on_done;
  ucs_status_ptr_t rreq = nullptr, sreq = nullptr;
  ucs_status_t ucs = UCS_OK;
  char* scratch;
  {
    StdMutexLock lock(&engine_->mu());
    // Earlier async calls still running: keep their order and progress on
    // the generic path.
    if (!engine_->idle()) return nullptr;
    if (!engine_->error().ok()) return MakeDoneWork(engine_->error());
    if (pair_scratch_ == nullptr) pair_scratch_ = AcquireScratch(std::max<size_t>(small_bytes_, 64));
    scratch = pair_scratch_;
    const uint64_t tag_base = engine_->NextTagBase(options.tag);
    ucp_request_param_t param{};
    rreq = ucp_tag_recv_nbx(engine_->worker(), scratch, bytes, MakeTag(tag_base, peer, 0, 1),
                            kFullMask, &param);
    if (UCS_PTR_IS_ERR(rreq)) {
      engine_->SetError(UcsError(absl::StrCat("ucx: receive from rank ", peer), UCS_PTR_STATUS(rreq)));
      return MakeDoneWork(engine_->error());
    }
    sreq = ucp_tag_send_nbx(ucx_->ep(peer), send, bytes, MakeTag(tag_base, rank_, 0, 1), &param);
    if (UCS_PTR_IS_ERR(sreq)) {
      ucs = UCS_PTR_STATUS(sreq);
      sreq = nullptr;
    }
  }
  absl::Status status;
  SteadyTime deadline{};
  for (int idle = 0;; ++idle) {
    {
      StdMutexLock lock(&engine_->mu());
      if (ucs == UCS_OK) engine_->ProgressLocked();
      const bool recv_done = Settle(&rreq, &ucs);
      const bool done = Settle(&sreq, &ucs) && recv_done;
      if (ucs != UCS_OK) {
        // As TagOp::Advance does: name a dead peer when its pidfd shows it,
        // giving a watched one PeerWatch::kDeferPeerError to show up.
        bool sticky = false;
        status = engine_->peers()->Blame(
            peer,
            absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ", peer,
                                                ": ", ucs_status_string(ucs))),
            &sticky);
        if (sticky && !status.ok()) engine_->SetError(status);
      } else if (!engine_->error().ok()) {
        status = engine_->error();
      } else if (done) {
        ReduceBuffers(type, op, recv, send, scratch, count);
        if (op == ReduceOp::kAvg) ScaleForAvg(type, recv, count, 2);
        if (on_done) on_done(options.tag, status);
        return MakeDoneWork(status);
      }
      if (status.ok() && ucs == UCS_OK && (idle & 255) == 255) {
        auto now = std::chrono::steady_clock::now();
        if (idle == 255) {
          deadline = now + options.timeout;
        } else if (now > deadline) {
          engine_->SetError(absl::DeadlineExceededError(absl::StrCat(
              "ucx: all-reduce did not finish within its timeout; rank ", rank_,
              " gives up (a peer may be stuck or never called it)")));
          status = engine_->error();
        }
      }
      if (!status.ok()) {
        // Cancelling completes the receive if UCX has not matched it. A
        // matched one (into pair_scratch_, which outlives the worker) or the
        // send (from the caller's `send`, which it may free once this
        // returns) would move again the next time the worker is
        // progressed: halt the engine instead (OpEngine::Halt).
        if (rreq != nullptr) ucp_request_cancel(engine_->worker(), rreq);
        const bool received = Settle(&rreq, &ucs);
        if (!Settle(&sreq, &ucs) || !received) engine_->Halt(status);
        // Released by UCX should they ever complete.
        if (rreq != nullptr) ucp_request_free(rreq);
        if (sreq != nullptr) ucp_request_free(sreq);
        if (on_done) on_done(options.tag, status);
        return MakeDoneWork(status);
      }
    }
    engine_->Pause(idle);
  }
}

}  // namespace ucx_internal
}  // namespace athanor
