// `athanor shell JOB [--rank R] [-- CMD...]`: a terminal on a rank of a
// running job (Interactive.Shell, through the coordinator to the rank's
// agent; docs/operations.md, "Shells"). With a terminal on stdin it is put
// in raw mode (restored on exit and on SIGINT/SIGTERM/SIGHUP/SIGQUIT) and
// its size follows SIGWINCH; otherwise stdin and stdout are piped through
// (the command's stdin ends when ours does). Exits with the command's exit
// code, or 1 when the shell could not be opened.
//
// Threads: the main thread reads the coordinator's stream and writes stdout;
// one more reads stdin (and the SIGWINCH self-pipe) and writes the stream.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "launcher/cli_commands.h"
#include "launcher/cli_util.h"
#include "proto/athanor_interactive.grpc.pb.h"

namespace athanor::cli {
namespace {

constexpr size_t kChunk = 32 << 10;  // under the 64 KiB a ShellInput may carry

// The terminal's state before raw mode, for the signal handlers too.
termios g_saved_termios;
std::atomic<bool> g_raw{false};
int g_wake_pipe[2] = {-1, -1};  // SIGWINCH and "stop" -> the input thread

void RestoreTerminal() {
  if (g_raw.exchange(false)) tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_termios);
}

void OnFatalSignal(int sig) {
  RestoreTerminal();
  signal(sig, SIG_DFL);
  raise(sig);
}

void OnWinch(int) {
  char c = 'w';
  (void)!write(g_wake_pipe[1], &c, 1);
}

bool WindowSize(rpc::WindowSize* out) {
  winsize ws{};
  if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0) return false;
  out->set_rows(ws.ws_row);
  out->set_cols(ws.ws_col);
  return true;
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int RunShell(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  int32_t rank = 0;
  po::options_description desc("athanor shell options");
  desc.add_options()
      ("job-id", po::value(&id)->required(), "the job (or allocation)")
      ("rank", po::value(&rank), "the rank to enter (default 0)");
  po::positional_options_description pos;
  pos.add("job-id", 1);
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor shell JOB [--rank R] [-- CMD...]\n"
                          "A terminal on a rank of a running job of your tenant: CMD (default /bin/sh) runs in "
                          "the rank's\nsandbox, with what the rank can reach and nothing more. With a terminal "
                          "on stdin it is\ninteractive; otherwise stdin and stdout are piped. Exits with CMD's "
                          "exit code (1: refused).",
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  if (rank < 0) {
    std::cerr << "athanor shell: --rank: " << rank << " is negative\n";
    return kExitUsage;
  }
  const bool tty = isatty(STDIN_FILENO) == 1;
  rpc::ShellInput first;
  rpc::ShellOpen* open = first.mutable_open();
  open->set_job_id(id);
  open->set_rank(rank);
  for (const std::string& a : cmd.after_dashes) open->add_command(a);
  open->set_tty(tty);
  if (tty) {
    const char* term = std::getenv("TERM");
    if (term != nullptr) open->set_term(std::string(term).substr(0, 64));
    WindowSize(open->mutable_size());
  }

  std::unique_ptr<rpc::Interactive::Stub> stub = rpc::Interactive::NewStub(ctx.channel);
  grpc::ClientContext c;  // no deadline: a shell lasts as long as its command
  if (!ctx.user.empty()) c.AddMetadata("x-athanor-user", ctx.user);
  std::unique_ptr<grpc::ClientReaderWriter<rpc::ShellInput, rpc::ShellOutput>> stream = stub->Shell(&c);
  if (!stream->Write(first)) return RpcError("shell", ctx, stream->Finish());

  if (pipe2(g_wake_pipe, O_CLOEXEC) != 0) {
    std::cerr << "athanor shell: pipe: " << strerror(errno) << "\n";
    return kExitRpcError;
  }
  if (tty && tcgetattr(STDIN_FILENO, &g_saved_termios) == 0) {
    termios raw = g_saved_termios;
    cfmakeraw(&raw);
    g_raw = true;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signal(sig, OnFatalSignal);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
  }
  if (tty) {
    struct sigaction winch {};
    winch.sa_handler = OnWinch;
    winch.sa_flags = SA_RESTART;
    sigaction(SIGWINCH, &winch, nullptr);
  }

  // Input: stdin -> data (eof when it ends), SIGWINCH -> resize, 's' on the
  // wake pipe -> stop (the command has ended).
  std::thread input([&] {
    bool stdin_open = true;
    for (;;) {
      pollfd fds[2] = {{g_wake_pipe[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
      if (poll(fds, stdin_open ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents & POLLIN) {
        char w;
        if (read(g_wake_pipe[0], &w, 1) == 1) {
          if (w == 's') return;
          rpc::ShellInput resize;
          if (WindowSize(resize.mutable_resize()) && !stream->Write(resize)) return;
        }
      }
      if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        std::string buf(kChunk, '\0');
        ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        rpc::ShellInput in;
        if (n <= 0) {
          stdin_open = false;
          in.set_eof(true);
        } else {
          buf.resize(static_cast<size_t>(n));
          in.set_data(std::move(buf));
        }
        if (!stream->Write(in)) return;
      }
    }
  });

  rpc::ShellOutput out;
  bool exited = false;
  int exit_code = kExitRpcError;
  while (!exited && stream->Read(&out)) {
    if (!out.data().empty()) WriteAll(STDOUT_FILENO, out.data());
    if (!out.notice().empty()) {
      std::string line = (tty ? "\r\nathanor: " : "athanor: ") + out.notice() + (tty ? "\r\n" : "\n");
      WriteAll(STDERR_FILENO, line);
    }
    if (out.exited()) {
      exited = true;
      exit_code = out.exit_code();
    }
  }
  char stop = 's';
  (void)!write(g_wake_pipe[1], &stop, 1);
  input.join();
  stream->WritesDone();
  while (stream->Read(&out)) {
  }
  grpc::Status s = stream->Finish();
  RestoreTerminal();
  if (!exited) {
    if (!s.ok()) return RpcError("shell", ctx, s);
    std::cerr << "athanor shell: the shell ended without its command's exit status\n";
    return kExitRpcError;
  }
  return exit_code;
}

}  // namespace athanor::cli
