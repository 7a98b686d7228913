// `athanor top [--interval S] [--once]`: redraws the cluster view in place
// (alternate screen, cursor home, lines cleared to their end) every interval
// until `q` (or Ctrl-C). With --once, or when stdout is not a terminal,
// prints one frame and exits.
#include "launcher/cli_top.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "absl/strings/numbers.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_help.h"
#include "launcher/cli_util.h"

namespace athanor::cli {
namespace {

volatile sig_atomic_t g_quit = 0;
void OnSignal(int) { g_quit = 1; }

// Raw keyboard input for the life of the object; restores the terminal.
class RawTerminal {
 public:
  RawTerminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;  // alternate screen, cursor hidden
  }
  ~RawTerminal() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

void Size(int* width, int* height) {
  winsize ws{};
  *width = 80;
  *height = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *width = ws.ws_col;
    *height = ws.ws_row;
  }
}

// Waits up to `ms` for a key; true when it was q/Q.
bool QuitPressed(int ms) {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char buf[16];
  ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
  if (n == 0) return true;  // stdin closed
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == 'q' || buf[i] == 'Q') return true;
  }
  return false;
}

}  // namespace

int RunTop(CliContext& ctx, const std::vector<std::string>& args) {
  double interval_s = 1;
  bool once = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--once") {
      once = true;
    } else if (args[i] == "--interval" && i + 1 < args.size() && absl::SimpleAtod(args[i + 1], &interval_s) &&
               interval_s >= 0.1 && interval_s <= 3600) {
      ++i;
    } else if (IsHelpFlag(args[i])) {
      std::cout << "usage: athanor top [--interval S] [--once]\n"
                   "  live cluster view: nodes x GPUs, running jobs (step rate, loss, ETA), the queue\n"
                   "  with why each job waits. q quits.\n";
      return kExitOk;
    } else {
      std::cerr << "athanor top: unexpected argument '" << args[i]
                << "' (--interval takes 0.1 to 3600 seconds)\n";
      return kExitUsage;
    }
  }
  auto stub = rpc::Observability::NewStub(ctx.channel);
  auto fetch = [&](rpc::ClusterView* view) {
    grpc::ClientContext c;
    PrepareCall(ctx, &c, 5);
    return stub->GetClusterView(&c, rpc::GetClusterViewRequest(), view);
  };
  if (once || !isatty(STDOUT_FILENO)) {
    rpc::ClusterView view;
    grpc::Status s = fetch(&view);
    if (!s.ok()) return RpcError("top", ctx, s);
    for (const std::string& line : RenderTop(view, ctx.coordinator, 80, 24)) std::cout << line << "\n";
    return kExitOk;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  RawTerminal terminal;
  while (!g_quit) {
    int width = 80, height = 24;
    Size(&width, &height);
    rpc::ClusterView view;
    grpc::Status s = fetch(&view);
    std::string frame = "\x1b[H";
    if (s.ok()) {
      for (const std::string& line : RenderTop(view, ctx.coordinator, width, height)) {
        frame += line + "\x1b[K\r\n";
      }
    } else {
      frame += "athanor top: " + ctx.coordinator + ": " + s.error_message() + " (retrying; q quits)\x1b[K\r\n";
    }
    frame.resize(frame.size() - 2);  // no newline after the last line: no scroll
    frame += "\x1b[J";
    std::cout << frame << std::flush;
    if (QuitPressed(static_cast<int>(interval_s * 1000))) break;
  }
  return kExitOk;
}

}  // namespace athanor::cli
