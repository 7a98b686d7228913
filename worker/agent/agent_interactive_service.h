// AgentInteractive gRPC service: the coordinator's way into this node's
// running ranks for a tenant (docs/operations.md, "Interactive instances").
// Only the coordinator calls it (mutual TLS, `coordinator_only`); it has
// already checked that the caller's tenant owns the job.
//   - Shell: a command in a running rank's sandbox (its box's namespaces,
//     cgroup, uid and root), on a pty or pipes (agent_shell.cc);
//   - Tunnel: a byte stream to the notebook server of a running notebook
//     rank (its socket inside the sandbox; agent_tunnel.cc).
//
// Thread-safe (gRPC calls it from many threads). The agent's gRPC server
// starts before its RankSupervisor exists: calls before Attach() are
// answered Unavailable. The supervisor is not owned and outlives the service.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/athanor_interactive.grpc.pb.h"
#include "worker/agent/notebook_ranks.h"
#include "worker/agent/rank_supervisor.h"
#include "worker/agent/shell_session.h"

namespace athanor::agent {

class AgentInteractiveService final : public rpc::AgentInteractive::Service {
 public:
  AgentInteractiveService(std::string work_dir, bool coordinator_only)
      : work_dir_(std::move(work_dir)), coordinator_only_(coordinator_only) {}
  void Attach(RankSupervisor* supervisor) {
    absl::MutexLock lock(&mu_);
    supervisor_ = supervisor;
    // A rank's new notice (the idle warning) reaches its open shells too.
    supervisor->SetNoticeListener([this](const RankKey& key, const std::string& text) { shells_.Notice(key, text); });
  }

  // The node's notebook ranks (not owned; outlives the service), for Tunnel.
  void AttachNotebooks(NotebookRanks* notebooks) {
    absl::MutexLock lock(&mu_);
    notebooks_ = notebooks;
  }

  grpc::Status Shell(grpc::ServerContext* ctx,
                     grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* stream) override;
  grpc::Status Tunnel(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<rpc::TunnelData, rpc::TunnelData>* stream) override;

 private:
  RankSupervisor* supervisor() const {
    absl::MutexLock lock(&mu_);
    return supervisor_;
  }

  NotebookRanks* notebooks() const {
    absl::MutexLock lock(&mu_);
    return notebooks_;
  }

  mutable absl::Mutex mu_;
  RankSupervisor* supervisor_ ABSL_GUARDED_BY(mu_) = nullptr;
  NotebookRanks* notebooks_ ABSL_GUARDED_BY(mu_) = nullptr;
  const std::string work_dir_;
  const bool coordinator_only_;
  ShellRegistry shells_;  // open shells, by rank (agent_shell.cc)
};

}  // namespace athanor::agent
