// The Observability gRPC service: the published cluster view and a job's
// telemetry history, for `athanor top` and tools. Reads only what
// CoordinatorMetrics published (no state lock). Thread-safe; the metrics
// object is not owned.
#pragma once

#include "coordinator/metrics_registry.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class ObservabilityService final : public rpc::Observability::Service {
 public:
  explicit ObservabilityService(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::Status GetClusterView(grpc::ServerContext*, const rpc::GetClusterViewRequest*,
                              rpc::ClusterView* resp) override;
  grpc::Status GetJobTelemetry(grpc::ServerContext*, const rpc::GetJobTelemetryRequest* req,
                               rpc::JobTelemetryHistory* resp) override;

 private:
  CoordinatorMetrics* const metrics_;
};

// The history as served (also by the dashboard's JSON API): InvalidArgument
// for an id that is empty or longer than 64 bytes.
absl::StatusOr<rpc::JobTelemetryHistory> JobHistory(const TelemetryStore& store, const std::string& job_id);

}  // namespace athanor::coord
