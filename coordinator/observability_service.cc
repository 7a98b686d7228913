#include "coordinator/observability_service.h"

#include "coordinator/grpc_status.h"
#include "coordinator/proto_convert.h"

namespace athanor::coord {

absl::StatusOr<rpc::JobTelemetryHistory> JobHistory(const TelemetryStore& store,
                                                    const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 64) {
    return absl::InvalidArgumentError("job_id: must have 1 to 64 bytes");
  }
  rpc::JobTelemetryHistory out;
  out.set_job_id(job_id);
  for (const TelemetryFigures& f : store.History(job_id)) ToProto(f, out.add_samples());
  return out;
}

grpc::Status ObservabilityService::GetClusterView(grpc::ServerContext*, const rpc::GetClusterViewRequest*,
                                                  rpc::ClusterView* resp) {
  *resp = metrics_->View()->view;
  return grpc::Status::OK;
}

grpc::Status ObservabilityService::GetJobTelemetry(grpc::ServerContext*,
                                                   const rpc::GetJobTelemetryRequest* req,
                                                   rpc::JobTelemetryHistory* resp) {
  absl::StatusOr<rpc::JobTelemetryHistory> h = JobHistory(*metrics_->telemetry(), req->job_id());
  if (!h.ok()) return ToGrpc(h.status());
  *resp = std::move(*h);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
