#include "collectives/ucx/op_engine.h"

#include <sched.h>
#include <time.h>

#include "absl/strings/str_cat.h"
#include "collectives/blocking_hint.h"
#include "common/logging.h"

namespace athanor {
namespace ucx_internal {

std::string PendingOp::What() const { return absl::StrCat(kind_, " (tag ", user_tag_, ")"); }

uint64_t OpEngine::NextTagBase(uint64_t tag) {
  uint32_t seq = sequence_[tag]++;
  return ((tag & 0xFFFFFull) << 44) | (static_cast<uint64_t>(seq & 0xFF) << 36);
}

std::unique_ptr<Work> OpEngine::Enqueue(std::shared_ptr<PendingOp> op) {
  ops_.push_back(op);
  num_ops_.store(ops_.size(), std::memory_order_release);
  if (!op->raises_events()) silent_ops_.fetch_add(1, std::memory_order_acq_rel);
  Advance(op.get());
  // A blocking call's thread progresses it right away in Wait.
  if (!op->finished() && !collectives_internal::InBlockingCall()) WakeLocked();
  return std::make_unique<EngineWork>(this, std::move(op));
}

void OpEngine::Advance(PendingOp* op) {
  if (op->finished_) return;
  if (!error_.ok()) return Fail(op, error_);
  if ((++op->advance_calls_ & 255) == 0 && std::chrono::steady_clock::now() > op->deadline_) {
    error_ = absl::DeadlineExceededError(
        absl::StrCat("ucx: ", op->What(), " did not finish within its timeout; rank ", o_.rank,
                     " gives up (a peer may be stuck or never called it)", op->Progress()));
    return Fail(op, error_);
  }
  op->Advance(this);
}

unsigned OpEngine::ProgressLocked() {
  unsigned events = 0;
  // Halted: UCX may hold requests into buffers their callers have freed.
  if (!halted_) {
    for (unsigned n; (n = ucp_worker_progress(o_.worker)) != 0;) events += n;
  }
  o_.peers->Tick();
  if (!o_.peers->error().ok()) SetError(o_.peers->error());
  if (sweep_) sweep_();
  for (auto it = ops_.begin(); it != ops_.end();) {
    PendingOp* op = it->get();
    Advance(op);
    events += op->moves_;
    op->moves_ = 0;
    if (op->finished_ && !op->reported_) {
      op->reported_ = true;
      ++events;
      if (o_.on_done) o_.on_done(op->user_tag_, op->status_);
    }
    if (op->finished_ && op->outstanding() == 0) {
      op->Release();
      if (!op->raises_events()) silent_ops_.fetch_sub(1, std::memory_order_acq_rel);
      it = ops_.erase(it);
      num_ops_.store(ops_.size(), std::memory_order_release);
    } else {
      ++it;
    }
  }
  return events;
}

void OpEngine::Fail(PendingOp* op, const absl::Status& status) {
  if (op->finished_) return;
  op->finished_ = true;
  op->status_ = status;
  op->Cancel(o_.worker);
  // Cancelling completed the receives UCX had not matched. What is left (a
  // matched receive, a send) would move data through the caller's buffers
  // the next time anyone progressed the worker, and the caller may free
  // them once it sees this op fail: nobody may progress it again. No caller
  // can see the failure before this returns (all under the lock).
  if (op->outstanding() > 0) Halt(status);
}

void OpEngine::Halt(const absl::Status& status) {
  if (halted_) return;
  halted_ = true;
  ATHANOR_LOG(DEBUG) << "ucx: rank " << o_.rank << ": a failed call left UCX requests in flight "
                     << "(" << status.message() << "); the worker is no longer progressed";
  SetError(status);
  FailAll(error_);
}

void OpEngine::FailAll(const absl::Status& status) {
  for (auto& op : ops_) Fail(op.get(), status);
}

void OpEngine::FailAndSettle(const absl::Status& status) {
  FailAll(status);
  for (int i = 0; i < 1000 && !ops_.empty() && !halted_; ++i) ProgressLocked();
}

void OpEngine::LeakUnsettled() {
  for (auto& op : ops_) {
    if (op->outstanding() > 0) new std::shared_ptr<PendingOp>(op);
  }
  ops_.clear();
  num_ops_.store(0, std::memory_order_release);
}

void OpEngine::Pause(int idle) const {
  // Others may share these cores (more ranks than cores in tests): after a
  // short spin, let them run. More ranks on this host than cores: the peer
  // we wait for may need our core, so yield almost at once.
  if (idle < SpinRounds()) return;
  if (o_.wait_nap_us > 0) {
    timespec nap{0, o_.wait_nap_us * 1000L};
    nanosleep(&nap, nullptr);
  } else {
    sched_yield();
  }
}

absl::Status OpEngine::WaitFor(const std::shared_ptr<PendingOp>& op,
                               std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  EnterWait();
  struct Leave {
    OpEngine* e;
    ~Leave() { e->LeaveWait(); }
  } leave{this};
  SteadyTime stuck_since{};
  for (int idle = 0, polls = 0;; ++polls) {
    bool only_silent = false;
    {
      StdMutexLock lock(&mu_);
      idle = ProgressLocked() > 0 ? 0 : idle + 1;
      if (op->finished_) return op->status_;
      only_silent = static_cast<size_t>(silent_ops_.load()) == ops_.size();
    }
    if ((polls & 63) == 63 && std::chrono::steady_clock::now() > deadline) {
      StdMutexLock lock(&mu_);
      return absl::DeadlineExceededError(absl::StrCat(
          "ucx: ", op->What(), " not done after ", timeout.count(), " ms", op->Progress()));
    }
    // Only shared-memory ops pending (nothing UCX must progress) and no
    // move for kNapAfter: sleep until the peer moves instead of holding a
    // core for nothing (docs/benchmarks.md, "One-host steadiness").
    if (only_silent && idle == SpinRounds()) {
      stuck_since = std::chrono::steady_clock::now();
    } else if (only_silent && idle > SpinRounds() && (idle & 15) == 0 &&
               std::chrono::steady_clock::now() - stuck_since >= kNapAfter &&
               op->Nap(kMaxNap)) {
      continue;
    }
    // As before naps existed: counted in polls, moved or not.
    Pause(polls);
  }
}

bool OpEngine::Poll(const std::shared_ptr<PendingOp>& op) {
  StdMutexLock lock(&mu_);
  ProgressLocked();
  return op->finished_;
}

void OpEngine::Abort() {
  StdMutexLock lock(&mu_);
  SetError(absl::AbortedError("ucx: communicator aborted"));
  FailAll(error_);
}

}  // namespace ucx_internal
}  // namespace athanor
