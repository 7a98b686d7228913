#include "coordinator/agent_service.h"

#include <algorithm>

#include "coordinator/grpc_status.h"
#include "coordinator/proto_convert.h"

namespace athanor::coord {

grpc::Status AgentService::RegisterNode(grpc::ServerContext*, const rpc::RegisterNodeRequest* req,
                                        rpc::RegisterNodeResponse* resp) {
  absl::Status s = core_->RegisterNode(FromProto(*req), FromProto(req->ranks()));
  if (!s.ok()) return ToGrpc(s);
  resp->set_heartbeat_interval_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(heartbeat_interval_).count());
  return grpc::Status::OK;
}

grpc::Status AgentService::Heartbeat(grpc::ServerContext* ctx, const rpc::HeartbeatRequest* req,
                                     rpc::HeartbeatResponse* resp) {
  if (req->max_wait_ms() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_wait_ms: must be >= 0");
  }
  Duration wait = std::min<Duration>(Millis(req->max_wait_ms()), heartbeat_interval_);
  absl::StatusOr<HeartbeatResult> r =
      core_->Heartbeat(req->node(), req->known_generation(), FromProto(req->ranks()), wait,
                       req->health_ok() || req->health_message().empty(), req->health_message());
  if (!r.ok()) return ToGrpc(r.status());
  resp->set_reregister(r->reregister);
  resp->set_generation(r->generation);
  for (const DesiredRank& d : r->desired) ToProto(d, resp->add_desired());
  return grpc::Status::OK;
}

grpc::Status AgentService::ReportCheckpoint(grpc::ServerContext*,
                                            const rpc::ReportCheckpointRequest* req,
                                            rpc::ReportCheckpointResponse*) {
  return ToGrpc(core_->ReportCheckpoint(req->job_id(), req->step(), 0));
}

}  // namespace athanor::coord
