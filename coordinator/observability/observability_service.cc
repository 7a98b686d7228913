#include "coordinator/observability/observability_service.h"

#include "coordinator/wire/grpc_status.h"
#include "coordinator/wire/proto_convert.h"

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

rpc::ClusterView ViewFor(const rpc::ClusterView& full, const std::string& tenant) {
  if (tenant.empty()) return full;
  rpc::ClusterView out;
  out.set_unix_ms(full.unix_ms());
  out.set_queue_length(full.queue_length());
  for (const rpc::NodeStatus& n : full.nodes()) {
    rpc::NodeStatus* node = out.add_nodes();
    *node = n;
    for (rpc::GpuSlot& g : *node->mutable_gpus()) {
      if (!g.job_id().empty() && g.tenant() != tenant) {
        g.set_job_id("-");  // held, by someone else
        g.set_tenant("other");
      }
    }
  }
  for (const rpc::JobStatus& j : full.jobs()) {
    if (j.tenant() == tenant) *out.add_jobs() = j;
  }
  for (const rpc::TenantStatus& t : full.tenants()) {
    if (t.tenant() == tenant) *out.add_tenants() = t;
  }
  return out;
}

bool JobVisible(const rpc::ClusterView& full, const std::string& tenant, const std::string& job_id) {
  if (tenant.empty()) return true;
  for (const rpc::JobStatus& j : full.jobs()) {
    if (j.id() == job_id) return j.tenant() == tenant;
  }
  return false;
}

namespace {

// The caller's tenant filter: "" for admins and --insecure.
absl::StatusOr<std::string> CallerTenant(const Authorizer* auth, const grpc::ServerContext& ctx,
                                         absl::string_view method) {
  absl::StatusOr<Identity> who = auth->Check(ctx, method);
  if (!who.ok()) return who.status();
  if (who->insecure || who->role == Role::kAdmin) return std::string();
  return who->tenant;
}

}  // namespace

grpc::Status ObservabilityService::GetClusterView(grpc::ServerContext* ctx, const rpc::GetClusterViewRequest*,
                                                  rpc::ClusterView* resp) {
  absl::StatusOr<std::string> tenant = CallerTenant(auth_, *ctx, "Observability.GetClusterView");
  if (!tenant.ok()) return ToGrpc(tenant.status());
  *resp = ViewFor(metrics_->View()->view, *tenant);
  return grpc::Status::OK;
}

grpc::Status ObservabilityService::GetJobTelemetry(grpc::ServerContext* ctx,
                                                   const rpc::GetJobTelemetryRequest* req,
                                                   rpc::JobTelemetryHistory* resp) {
  absl::StatusOr<std::string> tenant = CallerTenant(auth_, *ctx, "Observability.GetJobTelemetry");
  if (!tenant.ok()) return ToGrpc(tenant.status());
  if (!JobVisible(metrics_->View()->view, *tenant, req->job_id())) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "Observability.GetJobTelemetry: the job is not the caller's tenant's");
  }
  absl::StatusOr<rpc::JobTelemetryHistory> h = JobHistory(*metrics_->telemetry(), req->job_id());
  if (!h.ok()) return ToGrpc(h.status());
  *resp = std::move(*h);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
