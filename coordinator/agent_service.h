// The NodeAgent gRPC service: agents register and long-poll heartbeats here.
// A thin edge over CoordinatorCore. Thread-safe; the core is not owned.
#pragma once

#include "common/clock.h"
#include "coordinator/coordinator_core.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class AgentService final : public rpc::NodeAgent::Service {
 public:
  // `heartbeat_interval`: what agents are told to use, and the longest a
  // heartbeat is held.
  AgentService(CoordinatorCore* core, Duration heartbeat_interval)
      : core_(core), heartbeat_interval_(heartbeat_interval) {}

  grpc::Status RegisterNode(grpc::ServerContext*, const rpc::RegisterNodeRequest* req,
                            rpc::RegisterNodeResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const rpc::HeartbeatRequest* req,
                         rpc::HeartbeatResponse* resp) override;
  grpc::Status ReportCheckpoint(grpc::ServerContext*, const rpc::ReportCheckpointRequest* req,
                                rpc::ReportCheckpointResponse* resp) override;

 private:
  CoordinatorCore* const core_;
  const Duration heartbeat_interval_;
};

}  // namespace athanor::coord
