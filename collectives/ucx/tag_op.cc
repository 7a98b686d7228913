// The schedule executor of the ucx backend: posts each chain's steps, reacts
// to completions, reduces, and fails operations on errors and timeouts. All
// of it runs with mu_ held (see ucx_internal.h).
#include <poll.h>
#include <sched.h>
#include <time.h>

#include <cstring>

#include "absl/strings/str_join.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/ucx_internal.h"
#include "common/logging.h"

namespace athanor {
namespace ucx_internal {

void CloseEndpoints(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  for (ucp_ep_h ep : eps) {
    if (ep == nullptr) continue;
    ucs_status_ptr_t p = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(p)) {
      for (int i = 0; i < 100000 && ucp_request_check_status(p) == UCS_INPROGRESS; ++i) {
        ucp_worker_progress(worker);
      }
      ucp_request_free(p);
    }
  }
}

void SendDone(void* request, ucs_status_t status, void* user_data) {
  auto* cs = static_cast<ChainState*>(user_data);
  cs->send_req = nullptr;
  if (status != UCS_OK && cs->error == UCS_OK) cs->error = status;
  --cs->pending;
  --cs->op->outstanding;
  ucp_request_free(request);
}

void RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
  auto* cs = static_cast<ChainState*>(user_data);
  cs->recv_req = nullptr;
  if (status != UCS_OK && cs->error == UCS_OK) cs->error = status;
  --cs->pending;
  --cs->op->outstanding;
  ucp_request_free(request);
}

void OnEpError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<EpContext*>(arg);
  ctx->comm->OnPeerError(ctx->peer, status);
}

char* UcxCommunicator::AcquireScratch(size_t bytes) {
  size_t best = free_scratch_.size();
  for (size_t i = 0; i < free_scratch_.size(); ++i) {
    if (free_scratch_[i].first >= bytes &&
        (best == free_scratch_.size() || free_scratch_[i].first < free_scratch_[best].first)) {
      best = i;
    }
  }
  if (best < free_scratch_.size()) {
    char* p = free_scratch_[best].second;
    free_scratch_[best] = free_scratch_.back();
    free_scratch_.pop_back();
    return p;
  }
  char* p = static_cast<char*>(aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  all_scratch_.push_back(p);
  return p;
}

void UcxCommunicator::CheckPeersLocked() {
  if (peer_watch_.empty() || !peer_error_.ok() || exit_deferred_) return;
  std::vector<pollfd> fds;
  for (const auto& w : peer_watch_) fds.push_back({w.pidfd, POLLIN, 0});
  if (poll(fds.data(), fds.size(), 0) <= 0) return;
  // Name every peer gone by now: one death often makes its neighbours exit
  // too, and the first death is among those listed.
  std::vector<std::string> gone;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents) {
      gone.push_back(absl::StrCat(peer_watch_[i].rank, " (pid ", peer_watch_[i].pid, ")"));
    }
  }
  absl::Status error = absl::UnavailableError(absl::StrCat(
      "ucx: peer rank", gone.size() > 1 ? "s " : " ", absl::StrJoin(gone, ", "), " exited"));
  if (peer_watch_.size() + 1 < static_cast<size_t>(options_.world_size)) {
    // Some ranks are on other hosts: a rank here that exits may be a
    // survivor leaving on a remote rank's death. Give the remote's endpoint
    // error kDeferPeerError to name the rank that died (ProgressLocked
    // promotes this one after that).
    if (deferred_peer_error_.ok()) {
      deferred_peer_error_ = error;
      deferred_since_ = std::chrono::steady_clock::now();
    }
    exit_deferred_ = true;
    return;
  }
  peer_error_ = error;
  ATHANOR_LOG(ERROR) << "rank " << options_.rank << ": " << peer_error_.message();
}

bool UcxCommunicator::IsWatchedLocked(int peer) const {
  for (const auto& w : peer_watch_) {
    if (w.rank == peer) return true;
  }
  return false;
}

unsigned UcxCommunicator::ProgressLocked() {
  unsigned events = 0;
  for (unsigned n; (n = ucp_worker_progress(worker_)) != 0;) events += n;
  // Reading the clock costs as much as a progress call on some VMs: look
  // at it (and at the peers) once every 256 calls.
  if (!peer_watch_.empty() && peer_error_.ok() && (++progress_calls_ & 255) == 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= next_watch_) {
      next_watch_ = now + tuning_.watch_period;
      CheckPeersLocked();
      if (peer_error_.ok() && !deferred_peer_error_.ok() && now - deferred_since_ >= kDeferPeerError) {
        peer_error_ = deferred_peer_error_;
        ATHANOR_LOG(ERROR) << "rank " << options_.rank << ": " << peer_error_.message();
      }
    }
  }
  if (!peer_error_.ok() && error_.ok()) error_ = peer_error_;
  if (inter_ != nullptr) inter_->Sweep();
  for (auto it = ops_.begin(); it != ops_.end();) {
    PendingOp* op = it->get();
    Advance(op);
    if (op->finished && !op->reported) {
      op->reported = true;
      ++events;
      if (tuning_.on_done) tuning_.on_done(op->user_tag, op->status);
    }
    if (op->finished && op->outstanding == 0) {
      if (op->scratch != nullptr) free_scratch_.emplace_back(op->scratch_bytes, op->scratch);
      if (op->shared != nullptr) shared_pending_.fetch_sub(1, std::memory_order_acq_rel);
      op->scratch = nullptr;
      it = ops_.erase(it);
      num_ops_.store(ops_.size(), std::memory_order_release);
    } else {
      ++it;
    }
  }
  return events;
}

void UcxCommunicator::Advance(PendingOp* op) {
  if (op->finished) return;
  if (!error_.ok()) return Fail(op, error_);
  if ((++op->advance_calls & 255) == 0 && std::chrono::steady_clock::now() > op->deadline) {
    error_ = absl::DeadlineExceededError(
        absl::StrCat("ucx: ", op->What(), " did not finish within its timeout; rank ",
                     options_.rank, " gives up (a peer may be stuck or never called it)",
                     op->shared != nullptr ? shm_->Progress() : ""));
    return Fail(op, error_);
  }
  if (op->shared != nullptr) return AdvanceShared(op);
  const size_t nchains = op->chains.size();
  const size_t window = tuning_.window;
  bool moved = true;
  while (moved && !op->finished) {
    moved = false;
    while (op->next_chain < nchains &&
           (op->next_chain < window || op->chains[op->next_chain - window].done)) {
      ChainState& cs = op->chains[op->next_chain++];
      cs.started = true;
      if (op->schedule.chains[cs.index].steps.empty()) {
        cs.done = true;
      } else if (!PostStep(op, &cs)) {
        return;
      }
      moved = true;
    }
    for (size_t j = op->low_chain; j < op->next_chain; ++j) {
      ChainState& cs = op->chains[j];
      if (cs.done || cs.pending > 0) continue;
      if (cs.error != UCS_OK) {
        // A request fails when a peer closed its endpoint, often because
        // some other rank died: name the dead rank when a pidfd shows one.
        CheckPeersLocked();
        if (!peer_error_.ok()) {
          if (error_.ok()) error_ = peer_error_;
          return Fail(op, error_);
        }
        const Step& st = op->schedule.chains[j].steps[cs.step];
        int peer = st.send_peer >= 0 ? st.send_peer : st.recv_peer;
        if (IsWatchedLocked(peer)) {
          // Its process may be dying (endpoints closed, pidfd not yet
          // readable) or it left on another rank's death: wait a little
          // for a pidfd to name the dead rank.
          auto now = std::chrono::steady_clock::now();
          if (deferred_peer_error_.ok()) {
            deferred_peer_error_ = absl::UnavailableError(absl::StrCat(
                "ucx: ", op->What(), " failed talking to peer rank ", peer, ": ",
                ucs_status_string(cs.error)));
            deferred_since_ = now;
          }
          if (now - deferred_since_ < kDeferPeerError) continue;
          if (error_.ok()) error_ = deferred_peer_error_;
          return Fail(op, error_);
        }
        return Fail(op, absl::UnavailableError(absl::StrCat(
                            "ucx: ", op->What(), " failed talking to peer rank ", peer, ": ",
                            ucs_status_string(cs.error))));
      }
      FinishStep(op, &cs);
      if (op->finished) return;
      moved = true;
    }
    while (op->low_chain < nchains && op->chains[op->low_chain].done) ++op->low_chain;
    if (op->low_chain == nchains) op->finished = true;
  }
}

bool UcxCommunicator::PostStep(PendingOp* op, ChainState* cs) {
  const Step& st = op->schedule.chains[cs->index].steps[cs->step];
  const int msg = st.msg >= 0 ? st.msg : static_cast<int>(cs->step);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.user_data = cs;
  if (st.recv_peer >= 0) {
    param.cb.recv = RecvDone;
    ucs_status_ptr_t p = ucp_tag_recv_nbx(worker_, st.recv_buf, st.recv_bytes,
                                          MakeTag(op->tag_base, st.recv_peer, cs->index, msg),
                                          kFullMask, &param);
    if (UCS_PTR_IS_ERR(p)) {
      Fail(op, UcsError(absl::StrCat("ucx: receive from rank ", st.recv_peer), UCS_PTR_STATUS(p)));
      return false;
    }
    if (p != nullptr) {
      cs->recv_req = p;
      ++cs->pending;
      ++op->outstanding;
    }
  }
  if (st.send_peer >= 0) {
    param.cb.send = SendDone;
    ucs_status_ptr_t p = ucp_tag_send_nbx(eps_[st.send_peer], st.send_buf, st.send_bytes,
                                          MakeTag(op->tag_base, options_.rank, cs->index, msg),
                                          &param);
    if (UCS_PTR_IS_ERR(p)) {
      Fail(op, absl::UnavailableError(absl::StrCat("ucx: ", op->What(), ": send to peer rank ",
                                                   st.send_peer, " failed: ",
                                                   ucs_status_string(UCS_PTR_STATUS(p)))));
      return false;
    }
    if (p != nullptr) {
      cs->send_req = p;
      ++cs->pending;
      ++op->outstanding;
    }
  }
  return true;
}

void UcxCommunicator::FinishStep(PendingOp* op, ChainState* cs) {
  const auto& steps = op->schedule.chains[cs->index].steps;
  const Step& st = steps[cs->step];
  if (st.reduce_count > 0) {
    ReduceBuffers(op->type, op->op, st.reduce_dst, st.reduce_a, st.recv_buf, st.reduce_count);
  }
  if (st.scale_count > 0) ScaleForAvg(op->type, st.scale_buf, st.scale_count, options_.world_size);
  if (++cs->step == steps.size()) {
    cs->done = true;
    return;
  }
  PostStep(op, cs);
}

void UcxCommunicator::Fail(PendingOp* op, const absl::Status& status) {
  if (op->finished) return;
  op->finished = true;
  op->status = status;
  if (op->shared != nullptr) shm_->Abandon(op->shared.get());
  for (size_t j = op->low_chain; j < op->next_chain; ++j) {
    ChainState& cs = op->chains[j];
    // Sends to a dead peer complete with an error; receives never would.
    if (cs.recv_req != nullptr) ucp_request_cancel(worker_, cs.recv_req);
  }
}

void UcxCommunicator::FailAll(const absl::Status& status) {
  for (auto& op : ops_) Fail(op.get(), status);
}

absl::Status UcxCommunicator::WaitFor(const std::shared_ptr<PendingOp>& op,
                                      std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  EnterWait();
  struct Leave {
    UcxCommunicator* c;
    ~Leave() { c->LeaveWait(); }
  } leave{this};
  for (int idle = 0;; ++idle) {
    {
      StdMutexLock lock(&mu_);
      ProgressLocked();
      if (op->finished) return op->status;
    }
    if ((idle & 63) == 63 && std::chrono::steady_clock::now() > deadline) {
      StdMutexLock lock(&mu_);
      return absl::DeadlineExceededError(
          absl::StrCat("ucx: ", op->What(), " not done after ", timeout.count(), " ms",
                       op->shared != nullptr ? shm_->Progress() : ""));
    }
    // Others may share these cores (more ranks than cores in tests): after a
    // short spin, let them run.
    // More ranks on this host than cores: the peer we wait for may need
    // our core, so yield almost at once.
    if (idle >= (oversubscribed_ ? 4 : 256)) {
      if (tuning_.wait_nap_us > 0) {
        timespec nap{0, tuning_.wait_nap_us * 1000L};
        nanosleep(&nap, nullptr);
      } else {
        sched_yield();
      }
    }
  }
}

bool UcxCommunicator::Poll(const std::shared_ptr<PendingOp>& op) {
  StdMutexLock lock(&mu_);
  ProgressLocked();
  return op->finished;
}

void UcxCommunicator::Abort() {
  StdMutexLock lock(&mu_);
  if (error_.ok()) error_ = absl::AbortedError("ucx: communicator aborted");
  FailAll(error_);
}
}  // namespace ucx_internal
}  // namespace athanor
