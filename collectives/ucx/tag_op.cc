// TagOp (see tag_op.h): the schedule executor of the tag-message path.
#include "collectives/ucx/tag_op.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/tag_schedule_path.h"
#include "collectives/ucx/ucx_worker.h"

namespace athanor {
namespace ucx_internal {

void TagOp::Start(Schedule schedule, uint64_t tag_base, char* scratch, size_t scratch_bytes) {
  schedule_ = std::move(schedule);
  tag_base_ = tag_base;
  scratch_ = scratch;
  scratch_bytes_ = scratch_bytes;
  const Schedule& sc = schedule_;
  if (sc.pre_copy_bytes > 0) std::memmove(sc.pre_copy_dst, sc.pre_copy_src, sc.pre_copy_bytes);
  chains_.resize(sc.chains.size());
  for (size_t j = 0; j < sc.chains.size(); ++j) {
    chains_[j].op = this;
    chains_[j].index = j;
  }
}

void TagOp::SendDone(void* request, ucs_status_t status, void* user_data) {
  auto* cs = static_cast<ChainState*>(user_data);
  cs->send_req = nullptr;
  if (status != UCS_OK && cs->error == UCS_OK) cs->error = status;
  --cs->pending;
  --cs->op->outstanding_;
  ucp_request_free(request);
}

void TagOp::RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                     void* user_data) {
  auto* cs = static_cast<ChainState*>(user_data);
  cs->recv_req = nullptr;
  if (status != UCS_OK && cs->error == UCS_OK) cs->error = status;
  --cs->pending;
  --cs->op->outstanding_;
  ucp_request_free(request);
}

void TagOp::Advance(OpEngine* engine) {
  engine->mu().AssertHeld();  // the engine calls every PendingOp under its lock
  const size_t nchains = chains_.size();
  const size_t window = path_->window();
  bool moved = true;
  while (moved && !finished()) {
    moved = false;
    while (next_chain_ < nchains &&
           (next_chain_ < window || chains_[next_chain_ - window].done)) {
      ChainState& cs = chains_[next_chain_++];
      cs.started = true;
      if (schedule_.chains[cs.index].steps.empty()) {
        cs.done = true;
      } else if (!PostStep(engine, &cs)) {
        return;
      }
      moved = true;
    }
    for (size_t j = low_chain_; j < next_chain_; ++j) {
      ChainState& cs = chains_[j];
      if (cs.done || cs.pending > 0) continue;
      if (cs.error != UCS_OK) {
        const Step& st = schedule_.chains[j].steps[cs.step];
        const int peer = st.send_peer >= 0 ? st.send_peer : st.recv_peer;
        bool sticky = false;
        absl::Status blame = engine->peers()->Blame(
            peer,
            absl::UnavailableError(absl::StrCat("ucx: ", What(), " failed talking to peer rank ",
                                                peer, ": ", ucs_status_string(cs.error))),
            &sticky);
        if (blame.ok()) continue;  // a watched peer: give its pidfd a moment
        if (sticky) {
          engine->SetError(blame);
          return engine->Fail(this, engine->error());
        }
        return engine->Fail(this, blame);
      }
      FinishStep(engine, &cs);
      if (finished()) return;
      moved = true;
    }
    while (low_chain_ < nchains && chains_[low_chain_].done) ++low_chain_;
    if (low_chain_ == nchains) Finish();
  }
}

bool TagOp::PostStep(OpEngine* engine, ChainState* cs) {
  engine->mu().AssertHeld();
  const Step& st = schedule_.chains[cs->index].steps[cs->step];
  const int msg = st.msg >= 0 ? st.msg : static_cast<int>(cs->step);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.user_data = cs;
  if (st.recv_peer >= 0) {
    param.cb.recv = RecvDone;
    ucs_status_ptr_t p = ucp_tag_recv_nbx(engine->worker(), st.recv_buf, st.recv_bytes,
                                          MakeTag(tag_base_, st.recv_peer, cs->index, msg),
                                          kFullMask, &param);
    if (UCS_PTR_IS_ERR(p)) {
      engine->Fail(this, UcsError(absl::StrCat("ucx: receive from rank ", st.recv_peer),
                                  UCS_PTR_STATUS(p)));
      return false;
    }
    if (p != nullptr) {
      cs->recv_req = p;
      ++cs->pending;
      ++outstanding_;
    }
  }
  if (st.send_peer >= 0) {
    param.cb.send = SendDone;
    ucs_status_ptr_t p = ucp_tag_send_nbx(path_->ep(st.send_peer), st.send_buf, st.send_bytes,
                                          MakeTag(tag_base_, path_->rank(), cs->index, msg),
                                          &param);
    if (UCS_PTR_IS_ERR(p)) {
      engine->Fail(this, absl::UnavailableError(absl::StrCat(
                             "ucx: ", What(), ": send to peer rank ", st.send_peer,
                             " failed: ", ucs_status_string(UCS_PTR_STATUS(p)))));
      return false;
    }
    if (p != nullptr) {
      cs->send_req = p;
      ++cs->pending;
      ++outstanding_;
    }
  }
  return true;
}

void TagOp::FinishStep(OpEngine* engine, ChainState* cs) {
  engine->mu().AssertHeld();
  const auto& steps = schedule_.chains[cs->index].steps;
  const Step& st = steps[cs->step];
  if (st.reduce_count > 0) {
    ReduceBuffers(type_, op_, st.reduce_dst, st.reduce_a, st.recv_buf, st.reduce_count);
  }
  if (st.scale_count > 0) ScaleForAvg(type_, st.scale_buf, st.scale_count, path_->world_size());
  if (++cs->step == steps.size()) {
    cs->done = true;
    return;
  }
  PostStep(engine, cs);
}

void TagOp::Cancel(ucp_worker_h worker) {
  for (size_t j = low_chain_; j < next_chain_; ++j) {
    // Sends to a dead peer complete with an error; receives never would.
    if (chains_[j].recv_req != nullptr) ucp_request_cancel(worker, chains_[j].recv_req);
  }
}

void TagOp::Release() {
  if (scratch_ != nullptr) path_->ReleaseScratch(scratch_bytes_, scratch_);
  scratch_ = nullptr;
}

}  // namespace ucx_internal
}  // namespace athanor
