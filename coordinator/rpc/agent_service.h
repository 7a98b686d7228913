// The NodeAgent gRPC service: agents register, long-poll heartbeats and
// report checkpoints here. Served through gRPC's callback API: a parked
// heartbeat is an open call and a record in LongPolls, not a thread, so the
// coordinator's thread count stays flat however many agents there are.
// A thin edge over CoordinatorCore. Every call is authorised first
// (auth_policy.h): only an agent's certificate, only about its own node (a
// checkpoint report: only for a job with ranks on it). Thread-safe; the core
// and the authorizer are not owned.
#pragma once

#include "common/clock.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/secret_store.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/health/heartbeat_pace.h"
#include "coordinator/observability/telemetry_store.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class AgentService final : public rpc::NodeAgent::CallbackService {
 public:
  // `pace` (not owned): the interval agents are told to use, and the longest
  // a heartbeat is held (heartbeat_pace.h).
  // `secrets` (not owned): tenants' store credentials added to their ranks' env.
  // `telemetry` (not owned; null: metrics off) takes the training figures
  // heartbeats carry.
  AgentService(CoordinatorCore* core, const Authorizer* auth, const SecretStore* secrets,
               const HeartbeatPace* pace, TelemetryStore* telemetry = nullptr)
      : core_(core), auth_(auth), secrets_(secrets), pace_(pace), telemetry_(telemetry) {}

  grpc::ServerUnaryReactor* RegisterNode(grpc::CallbackServerContext* ctx,
                                         const rpc::RegisterNodeRequest* req,
                                         rpc::RegisterNodeResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const rpc::HeartbeatRequest* req,
                                      rpc::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* ReportCheckpoint(grpc::CallbackServerContext* ctx,
                                             const rpc::ReportCheckpointRequest* req,
                                             rpc::ReportCheckpointResponse* resp) override;

 private:
  // Check and CheckOwner for `method`; logs a refusal.
  absl::Status Authorize(const grpc::CallbackServerContext& ctx, absl::string_view method,
                         const AuthTarget& target);

  CoordinatorCore* const core_;
  const Authorizer* const auth_;
  const SecretStore* const secrets_;
  const HeartbeatPace* const pace_;
  TelemetryStore* const telemetry_;
};

}  // namespace athanor::coord
