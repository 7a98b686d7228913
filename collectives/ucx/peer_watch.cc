#include "collectives/ucx/peer_watch.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace athanor {
namespace ucx_internal {

PeerWatch::~PeerWatch() {
  for (const Watched& w : watched_) close(w.pidfd);
}

bool PeerWatch::Watch(int peer, int pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  watched_.push_back({peer, pid, fd});
  return true;
}

bool PeerWatch::IsWatched(int peer) const {
  for (const Watched& w : watched_) {
    if (w.rank == peer) return true;
  }
  return false;
}

void PeerWatch::Defer(const absl::Status& error) {
  if (!deferred_.ok()) return;
  deferred_ = error;
  deferred_since_ = std::chrono::steady_clock::now();
}

void PeerWatch::CheckExits() {
  if (watched_.empty() || !error_.ok() || exit_deferred_) return;
  std::vector<pollfd> fds;
  for (const Watched& w : watched_) fds.push_back({w.pidfd, POLLIN, 0});
  if (poll(fds.data(), fds.size(), 0) <= 0) return;
  // Name every peer gone by now: one death often makes its neighbours exit
  // too, and the first death is among those listed.
  std::vector<std::string> gone;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents) gone.push_back(absl::StrCat(watched_[i].rank, " (pid ", watched_[i].pid, ")"));
  }
  absl::Status error = absl::UnavailableError(absl::StrCat(
      "ucx: peer rank", gone.size() > 1 ? "s " : " ", absl::StrJoin(gone, ", "), " exited"));
  if (watched_.size() + 1 < static_cast<size_t>(world_size_)) {
    // Some ranks are on other hosts: a rank here that exits may be a
    // survivor leaving on a remote rank's death. Give the remote's endpoint
    // error kDeferPeerError to name the rank that died (Tick promotes this
    // one after that).
    Defer(error);
    exit_deferred_ = true;
    return;
  }
  error_ = error;
  ATHANOR_LOG(ERROR) << "rank " << rank_ << ": " << error_.message();
}

void PeerWatch::Tick() {
  // Reading the clock costs as much as a progress call on some VMs: look
  // at it (and at the peers) once every 256 calls.
  if (watched_.empty() || !error_.ok() || (++calls_ & 255) != 0) return;
  auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return;
  next_check_ = now + period_;
  CheckExits();
  if (error_.ok() && !deferred_.ok() && now - deferred_since_ >= kDeferPeerError) {
    error_ = deferred_;
    ATHANOR_LOG(ERROR) << "rank " << rank_ << ": " << error_.message();
  }
}

void PeerWatch::OnEndpointError(int peer, ucs_status_t status) {
  if (!error_.ok()) return;
  // With UCP_FEATURE_WAKEUP, shared memory reports a peer that closed its
  // endpoints (a neighbour failing on its own error). Blame the rank that
  // actually died when a watched one did.
  CheckExits();
  if (!error_.ok()) return;
  absl::Status error = absl::UnavailableError(absl::StrCat(
      "ucx: peer rank ", peer, " failed or is unreachable (", ucs_status_string(status), ")"));
  if (IsWatched(peer)) {
    // Its process may still be exiting (its pidfd not yet readable) or it
    // closed on someone else's death: give the pidfds time to name the
    // dead rank first (Tick).
    Defer(error);
    return;
  }
  error_ = error;
  ATHANOR_LOG(ERROR) << "rank " << rank_ << ": " << error_.message();
}

absl::Status PeerWatch::Blame(int peer, const absl::Status& failure, bool* sticky) {
  // A request fails when a peer closed its endpoint, often because some
  // other rank died: name the dead rank when a pidfd shows one.
  CheckExits();
  *sticky = true;
  if (!error_.ok()) return error_;
  if (IsWatched(peer)) {
    // Its process may be dying (endpoints closed, pidfd not yet readable)
    // or it left on another rank's death: wait a little for a pidfd.
    Defer(failure);
    if (std::chrono::steady_clock::now() - deferred_since_ < kDeferPeerError) return absl::OkStatus();
    return deferred_;
  }
  *sticky = false;
  return failure;
}

void PeerWatch::AppendPollFds(std::vector<pollfd>* fds) const {
  // Not once a death is known or deferred (the pidfd stays readable).
  if (!error_.ok() || exit_deferred_) return;
  for (const Watched& w : watched_) fds->push_back({w.pidfd, POLLIN, 0});
}

}  // namespace ucx_internal
}  // namespace athanor
