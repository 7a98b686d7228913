#include "worker/agent/shell_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::agent {
namespace {

// After a hangup, how long each signal is given before the next.
constexpr absl::Duration kSignalStep = absl::Seconds(2);

void SetWindow(int fd, int rows, int cols) {
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  ioctl(fd, TIOCSWINSZ, &ws);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShellSession>> ShellSession::Start(RankSupervisor* supervisor,
                                                                  const ShellOptions& options) {
  int ours = -1, theirs = -1;
  if (options.tty) {
    ours = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (ours < 0) return ErrnoStatus("posix_openpt");
    char name[128];
    if (grantpt(ours) != 0 || unlockpt(ours) != 0 || ptsname_r(ours, name, sizeof(name)) != 0) {
      absl::Status s = ErrnoStatus("prepare the pseudo-terminal");
      close(ours);
      return s;
    }
    theirs = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (theirs < 0) {
      absl::Status s = ErrnoStatus(absl::StrCat("open ", name));
      close(ours);
      return s;
    }
    SetWindow(ours, options.rows, options.cols);
  } else {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return ErrnoStatus("socketpair");
    ours = pair[0];
    theirs = pair[1];
  }
  absl::StatusOr<pid_t> pid =
      supervisor->StartShell(options.key, options.tenant, options.command, options.term, options.tty, theirs, theirs);
  close(theirs);
  if (!pid.ok()) {
    close(ours);
    return pid.status();
  }
  fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, *pid, 0));
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (pidfd < 0 || wake < 0) {
    absl::Status s = ErrnoStatus("pidfd_open / eventfd");
    kill(-*pid, SIGKILL);
    kill(*pid, SIGKILL);
    waitpid(*pid, nullptr, 0);
    supervisor->EndForeign(*pid);
    close(ours);
    if (pidfd >= 0) close(pidfd);
    if (wake >= 0) close(wake);
    return s;
  }
  return std::unique_ptr<ShellSession>(new ShellSession(supervisor, options.tty, ours, *pid, pidfd, wake));
}

ShellSession::ShellSession(RankSupervisor* supervisor, bool tty, int fd, pid_t pid, int pidfd, int wake)
    : supervisor_(supervisor), tty_(tty), fd_(fd), pid_(pid), pidfd_(pidfd), wake_(wake) {}

ShellSession::~ShellSession() {
  bool reaped;
  {
    absl::MutexLock lock(&mu_);
    reaped = reaped_;
  }
  if (!reaped) {
    // The helper SIGKILLs the command when it ends (its PR_SET_PDEATHSIG).
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    supervisor_->EndForeign(pid_);
  }
  close(fd_);
  close(pidfd_);
  close(wake_);
}

void ShellSession::Signal(int sig) {
  kill(-pid_, sig);
  if (sig == SIGKILL) kill(pid_, sig);
}

absl::Status ShellSession::Write(const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = tty_ ? write(fd_, data.data() + done, data.size() - done)
                     : send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      // The command is not reading: wait for room, or for its end.
      pollfd fds[2] = {{fd_, POLLOUT, 0}, {pidfd_, POLLIN, 0}};
      if (poll(fds, 2, 500) > 0 && (fds[1].revents & POLLIN)) {
        return absl::FailedPreconditionError("the command has ended");
      }
      if (gone_()) return absl::CancelledError("the client has gone");
      continue;
    }
    return ErrnoStatus("write to the command");
  }
  return absl::OkStatus();
}

void ShellSession::Resize(int rows, int cols) {
  if (!tty_) return;
  SetWindow(fd_, rows, cols);  // the kernel sends SIGWINCH to its foreground group
}

void ShellSession::CloseInput() {
  if (tty_) {
    termios t{};
    char eof = tcgetattr(fd_, &t) == 0 ? static_cast<char>(t.c_cc[VEOF]) : 4;
    (void)Write(std::string(1, eof));
  } else {
    shutdown(fd_, SHUT_WR);
  }
}

void ShellSession::Hangup() {
  absl::MutexLock lock(&mu_);
  if (hangup_at_ != absl::InfiniteFuture()) return;
  hangup_at_ = absl::Now();
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof(one));
}

void ShellSession::Notice(const std::string& text) {
  absl::MutexLock lock(&mu_);
  if (notices_.size() < 16) notices_.push_back(text);
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof(one));
}

bool ShellSession::ReadSome(std::string* out) {
  char buf[kMaxChunk];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;  // end of output (a pty master reads EIO once no one holds the terminal)
  }
}

ShellSession::Event ShellSession::Next() {
  for (;;) {
    if (gone_()) Hangup();
    {
      absl::MutexLock lock(&mu_);
      if (!notices_.empty()) {
        Event e;
        e.notice = std::move(notices_.front());
        notices_.pop_front();
        return e;
      }
      // After a hangup: SIGHUP, then SIGTERM, then SIGKILL, kSignalStep apart.
      while (hangup_at_ != absl::InfiniteFuture() && signals_sent_ < 3 &&
             absl::Now() >= hangup_at_ + kSignalStep * signals_sent_) {
        const int sig[] = {SIGHUP, SIGTERM, SIGKILL};
        Signal(sig[signals_sent_++]);
      }
    }
    pollfd fds[3] = {{wake_, POLLIN, 0}, {pidfd_, POLLIN, 0}, {fd_, POLLIN, 0}};
    int r = poll(fds, output_open_ ? 3 : 2, 250);
    if (r < 0 && errno != EINTR) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      (void)!read(wake_, &count, sizeof(count));
    }
    if (output_open_ && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      Event e;
      output_open_ = ReadSome(&e.data);
      if (!e.data.empty()) return e;
    }
    if (fds[1].revents & POLLIN) {
      // Ended: what it wrote last is already buffered here.
      Event e;
      if (output_open_) ReadSome(&e.data);
      if (!e.data.empty()) return e;
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      supervisor_->EndForeign(pid_);
      {
        absl::MutexLock lock(&mu_);
        reaped_ = true;
      }
      e.exited = true;
      e.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return e;
    }
  }
}

void ShellRegistry::Add(const RankKey& key, ShellSession* session) {
  absl::MutexLock lock(&mu_);
  open_[key].insert(session);
}

void ShellRegistry::Remove(const RankKey& key, ShellSession* session) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(key);
  if (it == open_.end()) return;
  it->second.erase(session);
  if (it->second.empty()) open_.erase(it);
}

void ShellRegistry::Notice(const RankKey& key, const std::string& text) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(key);
  if (it == open_.end()) return;
  for (ShellSession* s : it->second) s->Notice(text);
}

}  // namespace athanor::agent
