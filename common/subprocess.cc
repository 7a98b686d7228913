#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status.h"

extern char** environ;

namespace athanor {
namespace {
constexpr size_t kMaxPassedFds = 8;
}  // namespace

std::string ExitInfo::ToString() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exit code ", exit_code);
}

ExitInfo DecodeWaitStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
    info.exit_code = 128 + info.signal;
  }
  return info;
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("cannot start a process with an empty command");
  }
  // Everything the child needs is prepared before fork(): after it, only
  // async-signal-safe calls.
  std::vector<std::string> env_strings;
  if (options.inherit_env) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view kv(*e);
      std::string key(kv.substr(0, kv.find('=')));
      if (!options.env.count(key)) env_strings.emplace_back(kv);
    }
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = options.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_fd = -1, err_fd = -1;
  auto close_fds = [&] {
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0 && err_fd != out_fd) close(err_fd);
  };
  for (const auto& [child_fd, parent_fd] : options.pass_fds) {
    if (child_fd < 3 || parent_fd < 0 || options.pass_fds.size() > kMaxPassedFds) {
      return absl::InvalidArgumentError(absl::StrCat("cannot pass descriptor ", parent_fd, " as ", child_fd,
                                                     ": child descriptors start at 3, at most ",
                                                     kMaxPassedFds, " of them"));
    }
  }
  if (!options.stdout_path.empty()) {
    out_fd = open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) return ErrnoStatus(absl::StrCat("open ", options.stdout_path));
  } else if (options.stdout_fd >= 0) {
    out_fd = fcntl(options.stdout_fd, F_DUPFD_CLOEXEC, 0);  // ours to close, like an opened path
    if (out_fd < 0) return ErrnoStatus("dup stdout_fd");
  }
  int pipe_fds[2] = {-1, -1};
  if (options.capture_stdout && out_fd < 0) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
    out_fd = pipe_fds[1];
  }
  if (options.stderr_path == "=stdout") {
    err_fd = out_fd;
  } else if (!options.stderr_path.empty()) {
    err_fd = open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      close_fds();
      return ErrnoStatus(absl::StrCat("open ", options.stderr_path));
    }
  }
  int exec_err[2];
  if (pipe2(exec_err, O_CLOEXEC) != 0) {
    close_fds();
    return ErrnoStatus("pipe2");
  }

  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close_fds();
    close(exec_err[0]);
    close(exec_err[1]);
    if (pipe_fds[0] >= 0) close(pipe_fds[0]);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    if (options.new_process_group) setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) raise(options.parent_death_signal);  // it died before the prctl
    }
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    // Passed descriptors: each copied above every target first, so that no
    // dup2 below overwrites a source still to be copied; dup2 clears FD_CLOEXEC.
    int high = 3, copies[kMaxPassedFds], n_copies = 0;
    for (const auto& [child_fd, parent_fd] : options.pass_fds) high = std::max({high, child_fd + 1, parent_fd + 1});
    for (const auto& [child_fd, parent_fd] : options.pass_fds) {
      copies[n_copies] = fcntl(parent_fd, F_DUPFD_CLOEXEC, high);
      if (copies[n_copies++] < 0) _exit(127);
    }
    n_copies = 0;
    for (const auto& [child_fd, parent_fd] : options.pass_fds) {
      if (dup2(copies[n_copies++], child_fd) < 0) _exit(127);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) {
      int e = errno;
      ssize_t unused = write(exec_err[1], &e, sizeof(e));
      (void)unused;
      _exit(127);
    }
    execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t unused = write(exec_err[1], &e, sizeof(e));
    (void)unused;
    _exit(127);
  }
  if (options.new_process_group) setpgid(pid, pid);  // no race with the child's own call
  close(exec_err[1]);
  close_fds();
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_err[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_err[0]);
  if (n == sizeof(child_errno)) {
    int status;
    waitpid(pid, &status, 0);
    if (pipe_fds[0] >= 0) close(pipe_fds[0]);
    return ErrnoStatus(absl::StrCat("cannot execute '", options.argv[0], "'"), child_errno);
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, pipe_fds[0], options.new_process_group));
}

Subprocess::~Subprocess() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (!exit_) {
    // Reap if it has already exited, so no zombie outlives its owner.
    int status;
    waitpid(pid_, &status, WNOHANG);
  }
}

absl::Status Subprocess::Signal(int sig) {
  if (exit_) return absl::OkStatus();
  int rc = group_ ? kill(-pid_, sig) : kill(pid_, sig);
  if (rc != 0 && errno == ESRCH && group_) rc = kill(pid_, sig);
  if (rc != 0 && errno != ESRCH) return ErrnoStatus(absl::StrCat("kill ", pid_));
  return absl::OkStatus();
}

std::optional<ExitInfo> Subprocess::Poll() {
  if (exit_) return exit_;
  int status;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = DecodeWaitStatus(status);
  return exit_;
}

ExitInfo Subprocess::Wait() {
  if (exit_) return *exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = DecodeWaitStatus(status);
  return *exit_;
}

std::optional<ExitInfo> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  if (Poll()) return exit_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A pidfd becomes readable when the child exits; without one (old
  // kernels, some sandboxes) poll with a short back-off.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (Poll()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30))) < 0 && errno != EINTR) {
        close(pidfd);
        pidfd = -1;
      }
    } else {
      std::this_thread::sleep_for(std::min(pause, left));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return exit_;
}

std::string Subprocess::ReadAllStdout() {
  std::string out;
  if (stdout_fd_ < 0) return out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

}  // namespace athanor
