// Starting and watching child processes (ranks, health checks, test servers).
//
// A Subprocess is owned by one thread at a time; it is not thread-safe. The
// child runs in its own process group, so Signal() reaches everything it
// started. The destructor does not kill the child: call Signal()+Wait() first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

struct SubprocessOptions {
  std::vector<std::string> argv;             // argv[0] is looked up on PATH
  std::map<std::string, std::string> env;    // set on top of the inherited environment
  bool inherit_env = true;
  std::string working_dir;                   // empty: the parent's
  std::string stdout_path;                   // append to this file; empty: see stdout_fd
  // An open file the child's stdout goes to (the caller keeps and closes its
  // own descriptor), for a file the caller opened safely (openat, O_NOFOLLOW);
  // used when stdout_path is empty. -1: see capture_stdout.
  int stdout_fd = -1;
  std::string stderr_path;                   // append to this file; "=stdout" joins stdout
  bool capture_stdout = false;               // a pipe readable through stdout_fd()
  bool new_process_group = true;
  // Sent to the child when the thread that started it ends (PR_SET_PDEATHSIG),
  // e.g. when its parent process dies, however; 0: none.
  int parent_death_signal = 0;
  // Descriptors the child inherits across exec: child fd number -> the
  // caller's descriptor (which the caller keeps). Child numbers must be >= 3.
  std::map<int, int> pass_fds;
};

// How a child ended: exit_code is its exit status, or 128+signal when killed.
struct ExitInfo {
  int exit_code = 0;
  int signal = 0;  // non-zero when killed by a signal
  std::string ToString() const;
};

class Subprocess {
 public:
  // Forks and execs. NotFound / PermissionDenied naming argv[0] when it cannot
  // be executed; InvalidArgument for an empty argv.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const SubprocessOptions& options);

  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  int stdout_fd() const { return stdout_fd_; }  // -1 unless capture_stdout

  // Sends `sig` to the child's process group (or the child alone). OK if it
  // already exited.
  absl::Status Signal(int sig);
  // Non-blocking: the exit info once the child has exited, else nullopt.
  std::optional<ExitInfo> Poll();
  // Blocks until the child exits.
  ExitInfo Wait();
  // Blocks until the child exits or `timeout` passes (nullopt then; the
  // child keeps running).
  std::optional<ExitInfo> WaitFor(std::chrono::milliseconds timeout);
  // Reads all captured stdout until EOF (blocks).
  std::string ReadAllStdout();

 private:
  Subprocess(pid_t pid, int stdout_fd, bool group) : pid_(pid), stdout_fd_(stdout_fd), group_(group) {}
  pid_t pid_;
  int stdout_fd_;
  bool group_;
  std::optional<ExitInfo> exit_;
};

// Decodes a waitpid() status.
ExitInfo DecodeWaitStatus(int status);

}  // namespace athanor
