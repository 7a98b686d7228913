// A real athanor-coordinator child process for benchmarks and crash tests:
// started on a given loopback port and SQLite state file, killed (SIGKILL, as a
// crash would) or stopped (SIGTERM), and restarted on the same state and port.
//
// Not thread-safe: one thread drives it. pid() may be read by others between
// Start and Kill/Stop (it is an atomic so that a watchdog can read it).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace athanor::bench {

struct CoordinatorProcessOptions {
  std::string binary;                 // path of athanor-coordinator
  std::string state_path;             // --state
  std::string log_path;               // stdout and stderr, appended
  int port = 0;                       // on 127.0.0.1
  std::vector<std::string> extra_flags;
  // A cluster CA folder (security::InitClusterCa): the child serves TLS from
  // it and ChannelCredentials() calls with its admin.token. Empty: the child
  // runs --insecure (loopback, no authentication).
  std::string tls_dir;
};

class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(CoordinatorProcessOptions options);
  ~CoordinatorProcess();  // SIGKILLs a child still running
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // Starts the child and waits (up to `ready_timeout`) until it answers
  // ListNodes. FailedPrecondition when already running; Unavailable, with the
  // log's tail, when it exits or does not answer in time.
  absl::Status Start(std::chrono::milliseconds ready_timeout = std::chrono::seconds(20));
  // Starts the child without waiting for it to answer: a standby of a
  // coordinator on etcd listens only once it leads. FailedPrecondition when
  // already running.
  absl::Status Launch();
  // Waits (up to `timeout`) until the child launched answers ListNodes;
  // Unavailable, with the log's tail, when it exits or does not answer in time
  // (the child is then killed only when `kill_on_timeout`).
  absl::Status WaitReady(std::chrono::milliseconds timeout, bool kill_on_timeout = true);
  // Whether the child launched is still running (reaps it when it exited).
  bool Running();
  // SIGKILL and reap. OK when not running.
  void Kill();
  // SIGTERM and reap.
  void Stop();

  std::string address() const;
  // Credentials for a channel to the child (TLS + the admin token, with the
  // coordinator's name set in *args; plaintext without tls_dir).
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(grpc::ChannelArguments* args) const;
  pid_t pid() const { return pid_.load(); }  // 0 when not running
  const CoordinatorProcessOptions& options() const { return options_; }
  // The last `max_bytes` of the child's log.
  std::string LogTail(size_t max_bytes = 4000) const;

 private:
  void End(int sig);

  const CoordinatorProcessOptions options_;
  std::unique_ptr<Subprocess> child_;
  std::atomic<pid_t> pid_{0};
};

// Credentials for a bench client of a coordinator whose CA folder is
// `tls_dir` (TLS + its admin.token, the coordinator's name set in *args);
// plaintext when `tls_dir` is empty.
std::shared_ptr<grpc::ChannelCredentials> BenchCredentials(const std::string& tls_dir,
                                                           grpc::ChannelArguments* args);

// $ATHANOR_BIN_DIR/athanor-coordinator when that is set, else the one beside
// the running binary or in ../bin from it, else "athanor-coordinator" (PATH).
std::string DefaultCoordinatorBinary();

// A coordinator of a test's own: a new folder /tmp/PREFIX.XXXXXX (into
// *dir; the caller removes it) holding a cluster CA (TLS and the admin
// token, as in production), and options that keep the state and the log in
// it, on a free loopback port, with DefaultCoordinatorBinary().
absl::StatusOr<CoordinatorProcessOptions> ScratchCoordinatorOptions(const std::string& prefix,
                                                                    std::string* dir);

}  // namespace athanor::bench
