// OpEngine's progress thread (see "Thread model" in ucx_communicator.h): event-driven blocking progress as UCX documents it
// (ucp_worker_get_efd, ucp_worker_arm, then poll), plus an eventfd that new
// work and departing waiters use to wake it.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collectives/ucx/op_engine.h"
#include "common/logging.h"

namespace athanor {
namespace ucx_internal {
namespace {

// Progress rounds without any event before the thread arms and sleeps.
constexpr int kSpinRounds = 64;
// Longest armed sleep while operations are pending, so deadlines and peers
// are still checked when UCX has nothing to report.
constexpr int kPendingNapMs = 5;

}  // namespace

absl::Status OpEngine::StartProgressThread() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("ucx: eventfd: ", std::strerror(errno)));
  }
  ucs_status_t s = ucp_worker_get_efd(o_.worker, &worker_fd_);
  if (s != UCS_OK) {
    ATHANOR_LOG(WARNING) << "ucx: no worker event fd (" << ucs_status_string(s)
                         << "); the progress thread naps instead";
    worker_fd_ = -1;
  }
  progress_thread_ = std::thread([this] { ProgressThreadMain(); });
  return absl::OkStatus();
}

void OpEngine::StopProgressThread() {
  if (!progress_thread_.joinable()) return;
  {
    StdMutexLock lock(&mu_);
    stop_ = true;
    sleeping_ = true;  // force the write below
    WakeLocked();
  }
  progress_thread_.join();
  close(wake_fd_);
  wake_fd_ = -1;
}

void OpEngine::WakeLocked() {
  if (!sleeping_ || wake_fd_ < 0) return;
  sleeping_ = false;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void OpEngine::LeaveWait() {
  if (waiters_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last waiter left: hand what is still pending to the progress thread.
  // (An operation submitted after this read wakes the thread itself.)
  if (num_ops_.load(std::memory_order_acquire) == 0) return;
  StdMutexLock lock(&mu_);
  if (!ops_.empty()) WakeLocked();
}

void OpEngine::ProgressThreadMain() {
  int idle = 0;
  std::vector<pollfd> fds;
  for (;;) {
    bool armed = false, pending = false;
    size_t first_pid = 0;
    {
      StdMutexLock lock(&mu_);
      if (stop_) return;
      pending = !ops_.empty();
      if (pending && waiters_.load(std::memory_order_acquire) == 0) {
        idle = ProgressLocked() > 0 ? 0 : idle + 1;
        // Halted (OpEngine::Halt): what is left never moves; sleep until
        // woken, without arming the worker (its events are never taken).
        pending = !ops_.empty() && !halted_;
        if (pending && idle < kSpinRounds) continue;
        // Shared-memory ops raise no UCX event: nap briefly instead.
        if (pending && worker_fd_ >= 0 && silent_ops_.load(std::memory_order_acquire) == 0) {
          ucs_status_t s = ucp_worker_arm(o_.worker);
          if (s == UCS_ERR_BUSY) {  // events arrived meanwhile: progress them
            idle = 0;
            continue;
          }
          armed = s == UCS_OK;
        }
      } else {
        idle = 0;
        // A waiter progresses; it wakes us when it leaves with work pending.
        pending = false;
      }
      fds.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      if (armed) fds.push_back({worker_fd_, POLLIN, 0});
      first_pid = fds.size();
      o_.peers->AppendPollFds(&fds);
      sleeping_ = true;
    }
    int n = poll(fds.data(), fds.size(), !pending ? -1 : armed ? kPendingNapMs : 1);
    if (n < 0 && errno != EINTR) {
      ATHANOR_LOG(ERROR) << "ucx: progress thread poll: " << std::strerror(errno);
    }
    if (fds[0].revents) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
    }
    bool peer_gone = false;
    for (size_t i = first_pid; i < fds.size(); ++i) peer_gone |= fds[i].revents != 0;
    StdMutexLock lock(&mu_);
    sleeping_ = false;
    idle = 0;
    if (peer_gone) {
      o_.peers->CheckExits();
      if (!o_.peers->error().ok()) SetError(o_.peers->error());
      if (!error_.ok()) FailAll(error_);
    }
  }
}

}  // namespace ucx_internal
}  // namespace athanor
