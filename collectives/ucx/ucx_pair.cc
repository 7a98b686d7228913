// The 2-rank small all-reduce fast path of a blocking call: one send and one
// receive into a kept buffer, progressed on the caller's thread, then one
// reduce. No schedule, PendingOp or scratch lookup per call. It uses the tags
// and message of RecursiveDoublingAllReduce's single 2-rank step (chain 0,
// msg 1), so it pairs with a peer that runs the generic path (an async call).
#include <sched.h>

#include <cstring>

#include "collectives/local_communicator.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/ucx_internal.h"

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

std::unique_ptr<Work> UcxCommunicator::PairAllReduce(const void* send, void* recv, size_t count,
                                                     DataType type, ReduceOp op,
                                                     const CollectiveOptions& options) {
  const size_t bytes = count * DataTypeSize(type);
  const char* s = static_cast<const char*>(send);
  const char* d = static_cast<const char*>(recv);
  if (s != d && s < d + bytes && d < s + bytes) return nullptr;  // partial overlap
  const int peer = 1 - options_.rank;
  ucs_status_ptr_t rreq = nullptr, sreq = nullptr;
  ucs_status_t ucs = UCS_OK;
  char* scratch;
  {
    StdMutexLock lock(&mu_);
    // Earlier async calls still running: keep their order and progress on
    // the generic path.
    if (!ops_.empty()) return nullptr;
    if (!error_.ok()) return MakeDoneWork(error_);
    if (pair_scratch_ == nullptr) pair_scratch_ = AcquireScratch(std::max<size_t>(tuning_.small_bytes, 64));
    scratch = pair_scratch_;
    uint32_t seq = sequence_[options.tag]++;
    uint64_t tag_base = ((options.tag & 0xFFFFFull) << 44) | (static_cast<uint64_t>(seq & 0xFF) << 36);
    ucp_request_param_t param{};
    rreq = ucp_tag_recv_nbx(worker_, scratch, bytes, MakeTag(tag_base, peer, 0, 1), kFullMask,
                            &param);
    if (UCS_PTR_IS_ERR(rreq)) {
      error_ = UcsError(absl::StrCat("ucx: receive from rank ", peer), UCS_PTR_STATUS(rreq));
      return MakeDoneWork(error_);
    }
    sreq = ucp_tag_send_nbx(eps_[peer], send, bytes, MakeTag(tag_base, options_.rank, 0, 1), &param);
    if (UCS_PTR_IS_ERR(sreq)) {
      ucs = UCS_PTR_STATUS(sreq);
      sreq = nullptr;
    }
  }
  absl::Status status;
  SteadyTime deadline{}, failed_at{};
  for (int idle = 0;; ++idle) {
    {
      StdMutexLock lock(&mu_);
      if (ucs == UCS_OK) ProgressLocked();
      const bool recv_done = Settle(&rreq, &ucs);
      const bool done = Settle(&sreq, &ucs) && recv_done;
      if (ucs != UCS_OK) {
        // As Advance does: name a dead peer when its pidfd shows it, giving
        // a watched one kDeferPeerError to show up.
        CheckPeersLocked();
        auto now = std::chrono::steady_clock::now();
        if (failed_at == SteadyTime{}) failed_at = now;
        if (!peer_error_.ok()) {
          status = peer_error_;
        } else if (!IsWatchedLocked(peer) || now - failed_at >= kDeferPeerError) {
          status = absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ",
                                                       peer, ": ", ucs_status_string(ucs)));
        }
      } else if (!error_.ok()) {
        status = error_;
      } else if (done) {
        ReduceBuffers(type, op, recv, send, scratch, count);
        if (op == ReduceOp::kAvg) ScaleForAvg(type, recv, count, 2);
        if (tuning_.on_done) tuning_.on_done(options.tag, status);
        return MakeDoneWork(status);
      }
      if (status.ok() && ucs == UCS_OK && (idle & 255) == 255) {
        auto now = std::chrono::steady_clock::now();
        if (idle == 255) {
          deadline = now + options.timeout;
        } else if (now > deadline) {
          error_ = absl::DeadlineExceededError(absl::StrCat(
              "ucx: all-reduce did not finish within its timeout; rank ", options_.rank,
              " gives up (a peer may be stuck or never called it)"));
          status = error_;
        }
      }
      if (!status.ok()) {
        // Released by UCX once they complete; pair_scratch_ outlives the worker.
        if (rreq != nullptr) ucp_request_cancel(worker_, rreq), ucp_request_free(rreq);
        if (sreq != nullptr) ucp_request_free(sreq);
        if (tuning_.on_done) tuning_.on_done(options.tag, status);
        return MakeDoneWork(status);
      }
    }
    if (idle >= (oversubscribed_ ? 4 : 256)) sched_yield();
  }
}

}  // namespace ucx_internal
}  // namespace athanor
