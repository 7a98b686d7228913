#include "launcher/run/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/rank_env.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "launcher/run/line_prefixer.h"

namespace athanor {
namespace {

int g_signal_pipe = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (write(g_signal_pipe, &b, 1) < 0) {
  }  // the pipe is non-blocking; a full pipe already holds a wake-up
  errno = saved;
}

// Installs handlers that turn signals into bytes on a pipe; restores on exit.
class SignalPipe {
 public:
  absl::Status Open() {
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("pipe2");
    g_signal_pipe = fds_[1];
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
    return absl::OkStatus();
  }
  ~SignalPipe() {
    if (fds_[0] < 0) return;
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
    g_signal_pipe = -1;
    close(fds_[0]);
    close(fds_[1]);
  }
  int read_fd() const { return fds_[0]; }

 private:
  static constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGCHLD};
  int fds_[2] = {-1, -1};
  struct sigaction old_[3];
};

struct Rank {
  std::unique_ptr<Subprocess> process;
  int out_fd = -1, err_fd = -1;  // read ends; -1 once at EOF
  std::unique_ptr<LinePrefixer> out, err;
  std::optional<ExitInfo> exit;
};

// Reads what is available from `*fd` into `prefixer`; closes it at EOF.
void Drain(int* fd, LinePrefixer* prefixer) {
  char buf[65536];
  ssize_t n = read(*fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    prefixer->Flush();
    close(*fd);
    *fd = -1;
    return;
  }
  prefixer->Feed(buf, static_cast<size_t>(n));
}

}  // namespace

absl::StatusOr<int> RunLocalRanks(const LocalLaunchOptions& options) {
  if (options.nproc < 1) return absl::InvalidArgumentError("--nproc must be >= 1");
  if (options.command.empty()) {
    return absl::InvalidArgumentError("no command: use athanor-run --nproc N -- CMD [ARGS...]");
  }
  int port = options.master_port;
  if (port == 0) {
    ASSIGN_OR_RETURN(port, PickFreePort("127.0.0.1"));
  }
  SignalPipe signals;
  RETURN_IF_ERROR(signals.Open());

  std::vector<Rank> ranks(options.nproc);
  for (int r = 0; r < options.nproc; ++r) {
    RankEnv env;
    env.rank = r;
    env.world_size = options.nproc;
    env.local_rank = r;
    env.local_world_size = options.nproc;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    env.job_id = options.job_id;
    SubprocessOptions so;
    so.argv = options.command;
    so.env = env.ToEnvironment();
    // Empty optional variables would override what the user set: inherit those.
    for (const char* name :
         {"CUDA_VISIBLE_DEVICES", "ATHANOR_CHECKPOINT_URI", "ATHANOR_COORDINATOR"}) {
      if (so.env[name].empty()) so.env.erase(name);
    }
    so.capture_stdout = true;
    int err_pipe[2];
    if (pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
    so.stderr_path = absl::StrCat("/dev/fd/", err_pipe[1]);
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(so);
    close(err_pipe[1]);
    if (!p.ok()) {
      close(err_pipe[0]);
      for (int k = 0; k < r; ++k) {
        (void)ranks[k].process->Signal(SIGKILL);
        ranks[k].process->Wait();
      }
      return Annotate(p.status(), absl::StrCat("starting rank ", r));
    }
    ranks[r].process = std::move(*p);
    ranks[r].out_fd = ranks[r].process->stdout_fd();
    ranks[r].err_fd = err_pipe[0];
    ranks[r].out = std::make_unique<LinePrefixer>(absl::StrCat("[", r, "] "), STDOUT_FILENO);
    ranks[r].err = std::make_unique<LinePrefixer>(absl::StrCat("[", r, "] "), STDERR_FILENO);
  }

  int failed_rank = -1;
  using SteadyClock = std::chrono::steady_clock;
  std::optional<SteadyClock::time_point> kill_at;
  bool killed = false;
  auto stop_all = [&](int sig) {
    for (Rank& rank : ranks) {
      if (!rank.exit) (void)rank.process->Signal(sig);
    }
  };
  auto begin_stop = [&](int sig) {
    stop_all(sig);
    if (!kill_at) kill_at = SteadyClock::now() + options.grace;
  };

  while (true) {
    int running = 0, open_fds = 0;
    for (Rank& rank : ranks) {
      if (!rank.exit) ++running;
      open_fds += (rank.out_fd >= 0) + (rank.err_fd >= 0);
    }
    if (running == 0 && open_fds == 0) break;

    std::vector<pollfd> fds;
    std::vector<std::pair<int, bool>> owner;  // (rank, is_stderr)
    fds.push_back({signals.read_fd(), POLLIN, 0});
    owner.push_back({-1, false});
    for (int r = 0; r < options.nproc; ++r) {
      if (ranks[r].out_fd >= 0) {
        fds.push_back({ranks[r].out_fd, POLLIN, 0});
        owner.push_back({r, false});
      }
      if (ranks[r].err_fd >= 0) {
        fds.push_back({ranks[r].err_fd, POLLIN, 0});
        owner.push_back({r, true});
      }
    }
    int timeout_ms = -1;
    if (kill_at && !killed) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - SteadyClock::now())
                     .count() +
                 1));
    }
    // Once every rank has exited, a grandchild may still hold a pipe: bound the wait.
    if (running == 0) timeout_ms = timeout_ms < 0 ? 1000 : std::min(timeout_ms, 1000);
    const int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return ErrnoStatus("poll");
    if (n == 0 && running == 0 && (!kill_at || killed)) break;  // stray pipe holders

    if (n > 0 && (fds[0].revents & POLLIN)) {
      unsigned char sigs[64];
      ssize_t got = read(signals.read_fd(), sigs, sizeof(sigs));
      for (ssize_t i = 0; i < got; ++i) {
        if (sigs[i] == SIGTERM || sigs[i] == SIGINT) {
          std::cerr << "athanor-run: got " << strsignal(sigs[i]) << ", forwarding to all ranks"
                    << std::endl;
          begin_stop(sigs[i]);
        }
      }
    }
    for (size_t i = 1; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Rank& rank = ranks[owner[i].first];
      if (owner[i].second) {
        Drain(&rank.err_fd, rank.err.get());
      } else {
        Drain(&rank.out_fd, rank.out.get());
      }
    }
    for (int r = 0; r < options.nproc; ++r) {
      if (ranks[r].exit) continue;
      ranks[r].exit = ranks[r].process->Poll();
      if (ranks[r].exit && ranks[r].exit->exit_code != 0 && failed_rank < 0 && !kill_at) {
        failed_rank = r;
        std::cerr << "athanor-run: rank " << r << " failed (" << ranks[r].exit->ToString()
                  << "); stopping the other ranks" << std::endl;
        begin_stop(SIGTERM);
      }
    }
    if (kill_at && !killed && SteadyClock::now() >= *kill_at) {
      stop_all(SIGKILL);
      killed = true;
    }
  }

  if (failed_rank >= 0) return ranks[failed_rank].exit->exit_code;
  for (int r = 0; r < options.nproc; ++r) {
    if (ranks[r].exit->exit_code != 0) {
      std::cerr << "athanor-run: rank " << r << " ended with " << ranks[r].exit->ToString()
                << std::endl;
      return ranks[r].exit->exit_code;
    }
  }
  return 0;
}

}  // namespace athanor
