// PeerWatch: who of a communicator's peers died, and which one to blame.
//
// Peers on this host keep UCX shared memory, which cannot report a dead
// peer (asking for peer error handling drops it), so their processes are
// watched through pidfds; peers on other hosts are reported by UCX's peer
// error handling (OnEndpointError). A failed request or endpoint often
// names a survivor that closed on someone else's death, so errors about
// watched peers are deferred kDeferPeerError for a pidfd to name the rank
// that actually died.
//
// Thread model: set up (Watch) before the communicator runs; after that
// every method runs under the engine's lock (OpEngine::mu()), as does
// OnEndpointError, which UCX calls inside ucp_worker_progress.
#pragma once

#include <poll.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace athanor {
namespace ucx_internal {

using SteadyTime = std::chrono::steady_clock::time_point;

class PeerWatch {
 public:
  static constexpr std::chrono::milliseconds kDeferPeerError{300};

  PeerWatch(int rank, int world_size, std::chrono::milliseconds period)
      : rank_(rank), world_size_(world_size), period_(period) {}
  ~PeerWatch();  // closes the pidfds
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Set-up: watch rank `peer`, process `pid` of this pid namespace. False
  // when it cannot be watched (no pidfd): use UCX peer error handling.
  bool Watch(int peer, int pid);
  size_t num_watched() const { return watched_.size(); }
  bool IsWatched(int peer) const;

  // A dead peer, named; OK while none is known.
  const absl::Status& error() const { return error_; }
  // Polls the pidfds now; sets error() when a watched peer exited.
  void CheckExits();
  // Cheap enough for every progress pass: every 256th call, at most every
  // `period`, polls the pidfds and promotes an expired deferred error.
  void Tick();
  // UCX's endpoint error callback for `peer`.
  void OnEndpointError(int peer, ucs_status_t status);
  // A request to `peer` failed with `failure`. Returns OK to keep waiting (a
  // watched peer within kDeferPeerError), else the status to fail with: a
  // dead rank's name, the deferred error, or `failure`. *sticky: the
  // communicator as a whole fails with it.
  absl::Status Blame(int peer, const absl::Status& failure, bool* sticky);
  // The pidfds the progress thread sleeps on (none once a death is known).
  void AppendPollFds(std::vector<pollfd>* fds) const;

 private:
  struct Watched {
    int rank, pid, pidfd;  // pidfd becomes readable when the process ends
  };
  void Defer(const absl::Status& error);

  // Constant after set-up.
  const int rank_, world_size_;
  const std::chrono::milliseconds period_;
  std::vector<Watched> watched_;
  // The engine's lock.
  uint32_t calls_ = 0;
  SteadyTime next_check_{};
  absl::Status error_;
  // An error about a watched peer, promoted to error_ after kDeferPeerError
  // unless a pidfd names a dead rank first.
  absl::Status deferred_;
  SteadyTime deferred_since_{};
  // A local peer's exit was deferred (ranks on other hosts may name the
  // rank that died first); the pidfds are not polled again.
  bool exit_deferred_ = false;
};

}  // namespace ucx_internal
}  // namespace athanor
