// NotebookRanks: this node's notebook ranks (RankSpec.notebook) and what the
// agent keeps of each: the server's token, the rank's process, and what its
// kernels last did (docs/operations.md, "Notebooks").
//
// The token is 32 random bytes (OpenSSL RAND_bytes) in hex, made when the
// rank is first desired here and given to the server in JUPYTER_TOKEN through
// the sandbox's environment file; it never leaves the agent otherwise (not in
// argv, logs or reports). The tunnel (agent_tunnel.cc) adds it to the request
// it relays; the probe thread asks the server, every `probe_interval`, what
// its kernels do (notebook_probe.h), and the heartbeat reports it
// (RankReport.activity.kernels_*).
//
// A notebook's socket is reached from the host through the rank process's
// root: /proc/<pid>/root/tmp/athanor-nb-<job>.sock (common/notebook_paths.h).
// In a sandbox the supervisor's pid is athanor-sandbox-exec's and the rank is
// its only child; unsandboxed, the pid is the server's.
//
// Thread-safe: one mutex; the probe thread probes outside it.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/athanor.pb.h"
#include "worker/agent/notebook_probe.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

class NotebookRanks {
 public:
  NotebookRanks(bool sandboxed, absl::Duration probe_interval);
  ~NotebookRanks();  // stops the probe thread

  // The token of `key`'s server, made at the first call; "" when no random
  // bytes could be had (the rank then starts without one and the tunnel
  // refuses it).
  std::string TokenFor(const RankKey& key);
  // Forgets the notebook ranks not in `keep` (no longer desired here).
  void Retain(const std::set<RankKey>& keep);
  // The running ranks' processes (from the supervisor's reports).
  void NoteReports(const std::vector<RankStatusReport>& reports);

  struct Endpoint {
    std::string socket_path;  // the host's way to the server's socket
    std::string token;
  };
  // NotFound: no notebook rank `key` here; FailedPrecondition: not running
  // (yet, or any more).
  absl::StatusOr<Endpoint> Find(const RankKey& key) const;
  // Sets activity.kernels_busy / kernel_last_activity_unix (and measured) of
  // the reports of notebook ranks that were probed.
  void AddKernelActivity(google::protobuf::RepeatedPtrField<rpc::RankReport>* reports) const;

 private:
  struct Rank {
    std::string token;
    pid_t pid = 0;  // 0: not running
    bool probed = false;
    KernelActivity kernels;
  };
  absl::StatusOr<Endpoint> EndpointLocked(const RankKey& key, const Rank& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProbeLoop();

  const bool sandboxed_;
  const absl::Duration probe_interval_;
  mutable absl::Mutex mu_;
  std::map<RankKey, Rank> ranks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread prober_;
};

}  // namespace athanor::agent
