// CheckpointServiceSupervisor: runs the node's athanor-checkpoint-service for
// the agent and restarts it whenever it exits (a crash, a kill -9), after a
// short backoff; a restarted service discards what its predecessor had not
// uploaded and says so in its log (checkpoint/service/checkpoint_service.h).
//
// Ranks reach it at socket_path() through ATHANOR_CHECKPOINT_SERVICE, which
// the agent adds to every rank's environment; the socket's folder is bound
// into every sandbox.
//
// Threading: owns one thread; Stop() (or the destructor) sends SIGTERM, which
// lets the service finish the uploads in flight, and joins. The RankSupervisor
// (not owned) starts the child as a foreign process, so the rank reaper leaves
// it alone.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/subprocess.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

struct CheckpointServiceOptions {
  std::string exec_path;      // athanor-checkpoint-service
  std::string dir;            // holds the socket (bound into sandboxes)
  std::string staging_dir;    // tmpfs for staging areas
  std::string log_path;
  std::string stats_path;     // the service's upload totals (--stats-file); empty: none
  std::string coordinator;    // HOST:PORT
  std::string node;
  std::string tls_dir;        // the agent's cluster CA folder; empty: plaintext
  int64_t budget_mb = 8192;
  double upload_mbps = 0;     // 0: unthrottled
};

class CheckpointServiceSupervisor {
 public:
  CheckpointServiceSupervisor(CheckpointServiceOptions options, RankSupervisor* ranks);
  ~CheckpointServiceSupervisor();
  void Stop();
  std::string socket_path() const { return options_.dir + "/checkpoint.sock"; }
  // The rank registry the service reads (root's, 0700; ranks cannot reach it
  // although `dir` is bound into their sandboxes).
  std::string registry_dir() const { return RegistryDirIn(options_.dir); }
  static std::string RegistryDirIn(const std::string& dir) { return dir + "/registry"; }

 private:
  void Loop();

  const CheckpointServiceOptions options_;
  RankSupervisor* const ranks_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = 0;  // the running service, 0 when none
  std::thread thread_;
};

}  // namespace athanor::agent
