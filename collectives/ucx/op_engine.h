// OpEngine: the ucx backend's pending operations and the one lock that
// moves them.
//
// Every path (the tag schedules, the shared-memory all-reduce, the
// hierarchical one) hands its calls to the engine as PendingOps. The engine
// owns the lock that guards the UCP worker and every pending op; whoever
// holds it progresses the worker and advances *all* pending ops (the paths'
// ops interleave freely). It fails ops on a dead peer (PeerWatch), a
// deadline or Abort, and runs the progress thread (see "Thread model" in
// ucx_communicator.h): the thread sleeps in poll() without the lock.
//
// Failed ops and the caller's buffers: cancelling an op's receives stops
// only those UCX has not matched yet. A receive already matched (a
// rendezvous whose data is on its way, the rest of a fragmented message)
// and every send keep pointing into the caller's buffers, which the caller
// may free as soon as it sees the op fail. So an op that fails with
// requests still in flight halts the engine (Halt) before anyone can see it
// fail: the worker is never progressed again, and on this rank's side UCX
// moves data only inside ucp_worker_progress (TCP, shared memory, CMA
// reads), so nothing touches those buffers; the communicator fails every
// later call. Force-closing the endpoints instead would complete those
// requests, but it would also show the peers this rank as failed before
// some may have seen the rank that actually died (they would blame this
// one), and UCX cannot force-close the endpoints of peers on this host
// (they have no peer error handling).
//
// Thread model: mu() guards the worker, every PendingOp and the members
// marked below; UCX callbacks run inside ucp_worker_progress, which is only
// called with mu() held, and so does every PendingOp method. Work::Wait and
// Done may be called from any thread. Ownership: the worker and PeerWatch
// are not owned and outlive the engine; pending ops are shared with their
// Work objects.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "collectives/communicator.h"
#include "collectives/ucx/peer_watch.h"
#include "collectives/ucx/ucx_tuning.h"
#include "common/annotated_mutex.h"

namespace athanor {
namespace ucx_internal {

class OpEngine;

// One call of some path, as the engine sees it. Every virtual runs under
// the engine's lock.
class PendingOp {
 public:
  PendingOp(const char* kind, const CollectiveOptions& options)
      : kind_(kind), user_tag_(options.tag),
        deadline_(std::chrono::steady_clock::now() + options.timeout) {}
  virtual ~PendingOp() = default;

  // Moves the op as far as its peers allow, never blocking; ends it with
  // Finish() or engine->Fail().
  virtual void Advance(OpEngine* engine) = 0;
  // It ended early (an error): drop what it still waits for.
  virtual void Cancel(ucp_worker_h worker) {}
  // UCX requests of it still in flight: the engine keeps it until none.
  virtual size_t outstanding() const { return 0; }
  // Finished and settled: give back what it borrowed.
  virtual void Release() {}
  // False for ops that UCX never signals (shared memory): the progress
  // thread naps for them instead of sleeping on the worker's event fd.
  virtual bool raises_events() const { return true; }
  // Where its peers stand, for timeout messages.
  virtual std::string Progress() const { return ""; }
  // Called WITHOUT the engine's lock by a thread waiting for it that has
  // spun a while: sleep until the peer it waits for moves (at most `max`)
  // and return true, or return false at once where it cannot tell.
  virtual bool Nap(std::chrono::microseconds max) { return false; }

  std::string What() const;  // "all-reduce (tag 7)"
  uint64_t user_tag() const { return user_tag_; }
  bool finished() const { return finished_; }
  const absl::Status& status() const { return status_; }
  void Finish() { finished_ = true; }
  // The op moved without UCX seeing it (shared memory): a thread waiting
  // for it is not stuck.
  void NoteMove() { ++moves_; }

 private:
  friend class OpEngine;
  const char* const kind_;
  const uint64_t user_tag_;
  const SteadyTime deadline_;
  uint32_t advance_calls_ = 0;
  bool finished_ = false;
  bool reported_ = false;  // on_done was called
  absl::Status status_;
  uint32_t moves_ = 0;  // NoteMove calls not yet counted by the engine
};

class OpEngine {
 public:
  struct Options {
    int rank = 0;
    ucp_worker_h worker = nullptr;
    PeerWatch* peers = nullptr;
    bool oversubscribed = false;  // more ranks on this host than cores
    int wait_nap_us = 0;
    std::function<void(uint64_t tag, const absl::Status& status)> on_done;
  };
  explicit OpEngine(const Options& options) : o_(options) {}
  ~OpEngine() { StopProgressThread(); }
  OpEngine(const OpEngine&) = delete;
  OpEngine& operator=(const OpEngine&) = delete;

  StdMutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  ucp_worker_h worker() const { return o_.worker; }
  PeerWatch* peers() const { return o_.peers; }
  const Options& options() const { return o_; }

  // Run `sweep` on every progress pass (under mu()); before any op runs.
  void SetSweep(std::function<void()> sweep) { sweep_ = std::move(sweep); }
  absl::Status StartProgressThread();  // errors: eventfd
  void StopProgressThread();

  // The communicator's sticky error: set by a peer's death, a timeout,
  // Abort or Halt; every pending and later op fails with it.
  const absl::Status& error() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return error_; }
  void SetError(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (error_.ok()) error_ = status;
  }
  // The tag bits of the next call with `tag` (its low 20 bits and an 8-bit
  // per-tag sequence number), shared by every path.
  uint64_t NextTagBase(uint64_t tag) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `op` in, advances it once and returns its Work. A blocking call's
  // thread progresses it in Wait; otherwise the progress thread is woken.
  std::unique_ptr<Work> Enqueue(std::shared_ptr<PendingOp> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ops_.empty(); }
  // Ends `op` with `status` and drops what it waits for; halts the engine
  // where UCX still holds requests of it (see the top of this file).
  void Fail(PendingOp* op, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops progressing the worker for good: `status` becomes the sticky
  // error (unless one is set) and every op fails with it. Whatever UCX
  // still holds requests of stays where it is (LeakUnsettled). Idempotent.
  void Halt(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool halted() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return halted_; }
  // Progresses the worker (not once halted) and advances every op; returns
  // how many UCX events and finished ops it saw.
  unsigned ProgressLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tear-down: fails every op and, unless that halted the engine,
  // progresses a bounded number of times so UCX hands their requests back;
  // LeakUnsettled then keeps alive (leaks) the ops UCX still holds requests
  // of, rather than freeing them under a late callback (the worker's
  // destruction completes them).
  void FailAndSettle(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeakUnsettled() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // For Work: wait until `op` finishes (progressing inline) or `timeout`.
  absl::Status WaitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout);
  bool Poll(const std::shared_ptr<PendingOp>& op);
  void Abort();
  // A waiting thread's pause after `idle` fruitless polls: nothing at
  // first, then a yield (or a nap, UcxTuning::wait_nap_us).
  void Pause(int idle) const;

 private:
  // A waiter's fruitless polls before it yields.
  int SpinRounds() const { return o_.oversubscribed ? 4 : 256; }
  // How long a waiter spins and yields without seeing any move before it
  // naps: longer than a chunk step takes when both ranks run, shorter than
  // the scheduler's slice a rank loses to another thread.
  static constexpr std::chrono::microseconds kNapAfter{500};
  // Longest nap: a lost wake-up (none is expected) costs no more.
  static constexpr std::chrono::microseconds kMaxNap{2000};
  void Advance(PendingOp* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAll(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProgressThreadMain();
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnterWait() { waiters_.fetch_add(1, std::memory_order_acq_rel); }
  void LeaveWait();

  // Constant after construction (sweep_: after SetSweep, before any op).
  const Options o_;
  std::function<void()> sweep_;

  // Guards the worker and everything marked "guarded by mu_". A std::mutex
  // (annotated for clang's analysis): Debian's absl::Mutex runs deadlock
  // detection on every Lock.
  StdMutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool halted_ ABSL_GUARDED_BY(mu_) = false;  // Halt ran: the worker is never progressed again
  std::list<std::shared_ptr<PendingOp>> ops_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint32_t> sequence_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> num_ops_{0};      // ops_.size(), readable without mu_
  std::atomic<int> silent_ops_{0};      // ops in ops_ that raise no UCX event
  std::atomic<int> waiters_{0};         // threads in WaitFor

  // The progress thread; wake_fd_ is its eventfd, worker_fd_ UCX's event fd
  // (-1 when the worker has none: the thread then naps a millisecond).
  std::thread progress_thread_;
  int wake_fd_ = -1;
  int worker_fd_ = -1;
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// A Work over one PendingOp.
class EngineWork final : public Work {
 public:
  EngineWork(OpEngine* engine, std::shared_ptr<PendingOp> op)
      : engine_(engine), op_(std::move(op)) {}
  absl::Status Wait(std::chrono::milliseconds timeout) override {
    return engine_->WaitFor(op_, timeout);
  }
  bool Done() override { return engine_->Poll(op_); }

 private:
  OpEngine* engine_;  // not owned; outlives this Work
  std::shared_ptr<PendingOp> op_;
};

}  // namespace ucx_internal
}  // namespace athanor
