// The Interactive gRPC service: a tenant's way into its running instances
// (docs/operations.md, "Interactive instances").
//   - Shell: a terminal on a rank of a running job of the caller's tenant,
//     relayed to the rank's agent (AgentInteractive.Shell); its input counts
//     as use of an interactive instance (interactive_service.cc);
//   - KeepInstance: counts as use now, so an idle instance gets one more
//     idle period (interactive_service.cc);
//   - ListSnapshots / DeleteSnapshot: the instance snapshots a tenant's
//     reclaimed instances left (interactive_snapshots.cc).
//
// Thread-safe (gRPC calls it from many threads). The core, the authorizer,
// the token store, the agents' TLS material and the data store are not owned
// and outlive the service.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/object_store.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/token_store.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/rpc/shell_relay.h"
#include "proto/athanor_interactive.grpc.pb.h"
#include "security/tls.h"

namespace athanor::coord {

class InteractiveService final : public rpc::Interactive::Service {
 public:
  struct Deps {
    CoordinatorCore* core = nullptr;
    const Authorizer* auth = nullptr;
    const TokenStore* tokens = nullptr;
    const security::TlsMaterial* agent_tls = nullptr;  // null: plain channels (--insecure)
    ObjectStore* data = nullptr;                       // the data store (--data-store)
  };
  explicit InteractiveService(Deps deps) : deps_(deps), agents_(deps.agent_tls) {}

  grpc::Status Shell(grpc::ServerContext* ctx,
                     grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* stream) override;
  grpc::Status KeepInstance(grpc::ServerContext* ctx, const rpc::KeepInstanceRequest* req,
                            rpc::Job* resp) override;
  grpc::Status ListSnapshots(grpc::ServerContext* ctx, const rpc::ListSnapshotsRequest* req,
                             rpc::ListSnapshotsResponse* resp) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext* ctx, const rpc::DeleteSnapshotRequest* req,
                              rpc::InstanceSnapshot* resp) override;

 private:
  const Deps deps_;
  AgentInteractiveChannels agents_;  // shells' agents (shell_relay.h)
};

}  // namespace athanor::coord
