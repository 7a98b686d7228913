// ShellSession: one shell's command on this node (AgentInteractive.Shell,
// agent_shell.cc): started beside a running rank, in its sandbox
// (RankSupervisor::StartShell), on a pseudo-terminal whose master end the
// agent holds, or without a terminal on a socket pair (the command's stdin
// and its stdout+stderr; a socket rather than pipes so that writing to an
// ended command is an error, never SIGPIPE).
//
// The input side (Write, Resize, CloseInput, Hangup) is called from one
// thread, the output side (Next) from another; Notice from any. When the
// client goes away (Hangup), the command's process group gets SIGHUP, then
// 2 s later SIGTERM (the sandbox helper SIGKILLs the command), then SIGKILL.
// The destructor ends and reaps whatever still runs.
//
// ShellRegistry: the open sessions by rank, so that a rank's new notice
// (the coordinator's idle warning, RankTarget::notice) reaches its shells.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

struct ShellOptions {
  RankKey key;
  std::string tenant;  // the rank's tenant (checked against its uid)
  std::vector<std::string> command;
  std::string term = "xterm";
  bool tty = true;
  int rows = 24, cols = 80;  // tty only
};

class ShellSession {
 public:
  // What Next() hands out: output bytes, a notice, or the command's end.
  struct Event {
    std::string data;
    std::string notice;
    bool exited = false;
    int exit_code = 0;  // exit status, or 128+signal
  };
  static constexpr size_t kMaxChunk = 64 << 10;

  // Starts the command; NotFound when the rank does not run here.
  static absl::StatusOr<std::unique_ptr<ShellSession>> Start(RankSupervisor* supervisor, const ShellOptions& options);
  ~ShellSession();
  ShellSession(const ShellSession&) = delete;
  ShellSession& operator=(const ShellSession&) = delete;

  // Input side. Write fails once the command can no longer read.
  absl::Status Write(const std::string& data);
  void Resize(int rows, int cols);
  void CloseInput();  // pipes: its stdin ends; tty: an end-of-file character
  void Hangup();      // the client has gone away

  // Output side: blocks until there is an event. After `exited`, none follow.
  Event Next();

  void Notice(const std::string& text);
  // Whether the client is gone (its call cancelled): checked while waiting,
  // so that a command that reads no input is hung up all the same. Set
  // before the two sides start.
  void SetGone(std::function<bool()> gone) { gone_ = std::move(gone); }

 private:
  ShellSession(RankSupervisor* supervisor, bool tty, int fd, pid_t pid, int pidfd, int wake);
  void Signal(int sig);
  // Reads what is there now (non-blocking); false at end of output.
  bool ReadSome(std::string* out);

  RankSupervisor* const supervisor_;
  const bool tty_;
  const int fd_;     // the pty master, or the agent's end of the socket pair
  const pid_t pid_;  // the started process (the sandbox helper), leader of its group
  const int pidfd_;  // readable once it has exited
  const int wake_;   // eventfd: a notice or a hangup is waiting
  absl::Mutex mu_;
  std::deque<std::string> notices_ ABSL_GUARDED_BY(mu_);
  absl::Time hangup_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int signals_sent_ ABSL_GUARDED_BY(mu_) = 0;  // after hangup: SIGHUP, SIGTERM, SIGKILL
  std::function<bool()> gone_ = [] { return false; };
  bool output_open_ = true;  // output side only
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
};

class ShellRegistry {
 public:
  void Add(const RankKey& key, ShellSession* session);
  void Remove(const RankKey& key, ShellSession* session);
  // Every open shell of `key` shows `text`.
  void Notice(const RankKey& key, const std::string& text);

 private:
  absl::Mutex mu_;
  std::map<RankKey, std::set<ShellSession*>> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::agent
