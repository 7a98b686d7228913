// The NodeAgent gRPC service: agents register, long-poll heartbeats and
// report checkpoints here. Served through gRPC's callback API: a parked
// heartbeat is an open call and a record in LongPolls, not a thread, so the
// coordinator's thread count stays flat however many agents there are.
// A thin edge over CoordinatorCore. Thread-safe; the core is not owned.
#pragma once

#include "common/clock.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/telemetry_store.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class AgentService final : public rpc::NodeAgent::CallbackService {
 public:
  // `heartbeat_interval`: what agents are told to use, and the longest a
  // heartbeat is held.
  // `telemetry` (not owned; null: metrics off) takes the training figures
  // heartbeats carry.
  AgentService(CoordinatorCore* core, Duration heartbeat_interval,
               TelemetryStore* telemetry = nullptr)
      : core_(core), heartbeat_interval_(heartbeat_interval), telemetry_(telemetry) {}

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
  CoordinatorCore* const core_;
  const Duration heartbeat_interval_;
  TelemetryStore* const telemetry_;
};

}  // namespace athanor::coord
