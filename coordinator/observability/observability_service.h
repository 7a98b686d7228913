// The Observability gRPC service: the published cluster view and a job's
// telemetry history, for `athanor top` and tools. Reads only what
// CoordinatorMetrics published (no state lock). Every call is authorised
// (auth_policy.h): a user sees their own tenant's jobs only. Thread-safe; the
// metrics object and the authorizer are not owned.
#pragma once

#include "coordinator/auth/auth_policy.h"
#include "coordinator/observability/metrics_registry.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class ObservabilityService final : public rpc::Observability::Service {
 public:
  ObservabilityService(CoordinatorMetrics* metrics, const Authorizer* auth)
      : metrics_(metrics), auth_(auth) {}
  grpc::Status GetClusterView(grpc::ServerContext*, const rpc::GetClusterViewRequest*,
                              rpc::ClusterView* resp) override;
  grpc::Status GetJobTelemetry(grpc::ServerContext*, const rpc::GetJobTelemetryRequest* req,
                               rpc::JobTelemetryHistory* resp) override;

 private:
  CoordinatorMetrics* const metrics_;
  const Authorizer* const auth_;
};

// What a caller of `tenant` may see of `full` ("": everything, for admins and
// open servers): its tenant's jobs; every node and GPU, but a GPU held by
// another tenant shows as held by job "-" of tenant "other"; its tenant's usage only.
rpc::ClusterView ViewFor(const rpc::ClusterView& full, const std::string& tenant);
// Whether `job_id` is a job `tenant` may see in `full` ("" sees every job).
bool JobVisible(const rpc::ClusterView& full, const std::string& tenant, const std::string& job_id);

// The history as served (also by the dashboard's JSON API): InvalidArgument
// for an id that is empty or longer than 64 bytes.
absl::StatusOr<rpc::JobTelemetryHistory> JobHistory(const TelemetryStore& store, const std::string& job_id);

}  // namespace athanor::coord
