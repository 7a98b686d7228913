#include "coordinator/rpc/coordinator_service.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/core/core_commands.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"
#include "coordinator/wire/proto_convert.h"

namespace athanor::coord {
namespace {

grpc::Status CheckId(const std::string& id) {
  return ToGrpc(ValidateName("job_id", id));
}

rpc::JobState WireState(JobState s) {
  rpc::Job job;
  JobRecord r;
  r.state = s;
  ToProto(r, &job);
  return job.state();
}

}  // namespace

absl::StatusOr<Identity> CoordinatorService::Authorize(const grpc::ServerContextBase& ctx,
                                                       absl::string_view method) {
  return AuthorizeCall(security_.auth, ctx, method);
}

grpc::Status CoordinatorService::AuthorizeJob(const grpc::ServerContextBase& ctx,
                                              absl::string_view method, const std::string& job_id,
                                              JobRecord* out) {
  absl::StatusOr<Identity> who = Authorize(ctx, method);
  if (!who.ok()) return ToGrpc(who.status());
  if (grpc::Status s = CheckId(job_id); !s.ok()) return s;
  absl::StatusOr<JobRecord> job = CoreReads(core_).GetJob(job_id);
  if (!job.ok()) return ToGrpc(job.status());
  absl::Status owner = security_.auth->CheckOwner(*who, method, AuthTarget{.tenant = job->spec.tenant});
  if (!owner.ok()) {
    ATHANOR_LOG(WARNING) << method << " of job " << job_id << " refused: " << owner.message();
    return ToGrpc(owner);
  }
  if (out != nullptr) *out = std::move(*job);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* CoordinatorService::SubmitJob(grpc::CallbackServerContext* ctx,
                                                       const rpc::SubmitJobRequest* req,
                                                       rpc::SubmitJobResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.SubmitJob");
  JobSpec spec = FromProto(req->spec());
  absl::Status admitted =
      who.ok() ? security_.submissions->Admit(*who, Caller(ctx), &spec) : who.status();
  if (!admitted.ok()) {
    if (who.ok()) ATHANOR_LOG(WARNING) << who->Describe() << ": submit refused: " << admitted.message();
    reactor->Finish(ToGrpc(admitted));
    return reactor;
  }
  // Answered from the committer thread once the job is durable.
  const int32_t max_pending = security_.submissions->MaxPending(*who);
  core_->SubmitJob(spec, req->idempotency_key(),
                   [reactor, resp, who = Who(security_.auth, ctx), tenant = spec.tenant](
                       absl::StatusOr<SubmitResult> r) {
                     ATHANOR_LOG(INFO) << who << ": submit (tenant '" << tenant << "') -> "
                                       << (r.ok() ? absl::StrCat("job ", r->job_id,
                                                                 r->duplicate ? " (a retry)" : "")
                                                  : r.status().ToString());
                     if (r.ok()) {
                       resp->set_job_id(r->job_id);
                       resp->set_duplicate(r->duplicate);
                     }
                     reactor->Finish(r.ok() ? grpc::Status::OK : ToGrpc(r.status()));
                   },
                   max_pending);
  return reactor;
}

grpc::Status CoordinatorService::GetJob(grpc::ServerContext* ctx, const rpc::GetJobRequest* req,
                                        rpc::Job* resp) {
  JobRecord job;
  if (grpc::Status s = AuthorizeJob(*ctx, "Coordinator.GetJob", req->job_id(), &job); !s.ok()) {
    return s;
  }
  ToProto(job, resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListJobs(grpc::ServerContext* ctx, const rpc::ListJobsRequest* req,
                                          rpc::ListJobsResponse* resp) {
  absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.ListJobs");
  if (!who.ok()) return ToGrpc(who.status());
  if (req->tenant().size() > kMaxStringBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "tenant: longer than 4096 bytes");
  }
  // Users list their own tenant's jobs: naming another is refused, naming none is theirs.
  const std::string tenant = TenantOfRead(*who, req->tenant());
  if (absl::Status s = security_.auth->CheckOwner(*who, "Coordinator.ListJobs", {.tenant = tenant});
      !s.ok()) {
    return ToGrpc(s);
  }
  for (const JobRecord& j : CoreReads(core_).ListJobs(req->all(), tenant)) ToProto(j, resp->add_jobs());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CancelJob(grpc::ServerContext* ctx,
                                           const rpc::CancelJobRequest* req,
                                           rpc::CancelJobResponse* resp) {
  if (grpc::Status s = AuthorizeJob(*ctx, "Coordinator.CancelJob", req->job_id()); !s.ok()) return s;
  ATHANOR_LOG(INFO) << Who(security_.auth, ctx) << ": cancel job " << req->job_id();
  absl::StatusOr<JobRecord> job = CoreCommands(core_).CancelJob(req->job_id());
  if (!job.ok()) return ToGrpc(job.status());
  ToProto(*job, resp->mutable_job());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListNodes(grpc::ServerContext* ctx, const rpc::ListNodesRequest*,
                                           rpc::ListNodesResponse* resp) {
  absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.ListNodes");
  if (!who.ok()) return ToGrpc(who.status());
  std::vector<NodeView> nodes = CoreReads(core_).ListNodes();
  // A user sees the ids of its own tenant's jobs only; where others' jobs
  // hold GPUs shows in gpus_allocated alone.
  if (!SeesEveryTenant(*who)) {
    std::set<std::string> own;
    for (const JobRecord& j : CoreReads(core_).ListJobs(/*include_finished=*/false, who->tenant)) {
      own.insert(j.id);
    }
    for (NodeView& n : nodes) {
      std::erase_if(n.jobs, [&](const std::string& id) { return own.count(id) == 0; });
    }
  }
  for (const NodeView& n : nodes) ToProto(n, resp->add_nodes());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetLogs(grpc::ServerContext* ctx, const rpc::GetLogsRequest* req,
                                         rpc::GetLogsResponse* resp) {
  if (grpc::Status s = AuthorizeJob(*ctx, "Coordinator.GetLogs", req->job_id()); !s.ok()) return s;
  if (req->attempt() < 0 || req->page_start() < 0 || req->tail_bytes() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "attempt, page_start and tail_bytes: must be >= 0");
  }
  const int64_t max = AgentLogReader::kMaxLogBytes;
  const int64_t tail = req->tail_bytes() > 0 ? std::min<int64_t>(req->tail_bytes(), max) : max;
  absl::StatusOr<JobRecord> job = CoreReads(core_).GetJob(req->job_id());
  if (!job.ok()) return ToGrpc(job.status());
  absl::StatusOr<std::vector<LogTarget>> targets =
      CoreReads(core_).LogTargets(req->job_id(), req->rank(), req->attempt());
  if (!targets.ok()) return ToGrpc(targets.status());
  const size_t start = static_cast<size_t>(req->page_start());
  if (start > 0 && start >= targets->size()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("page_start: ", start, " is past the ", targets->size(),
                                     " rank(s) selected"));
  }
  logs_.ReadPage(job->id, *targets, start, tail, resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::PreemptJob(grpc::ServerContext* ctx,
                                            const rpc::PreemptJobRequest* req,
                                            rpc::PreemptJobResponse* resp) {
  if (grpc::Status s = AuthorizeJob(*ctx, "Coordinator.PreemptJob", req->job_id()); !s.ok()) return s;
  if (req->grace_period_s() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "grace_period_s: must be >= 0");
  }
  ATHANOR_LOG(INFO) << Who(security_.auth, ctx) << ": preempt job " << req->job_id();
  absl::StatusOr<JobRecord> job =
      CoreCommands(core_).PreemptJob(req->job_id(), Seconds(static_cast<double>(req->grace_period_s())));
  if (!job.ok()) return ToGrpc(job.status());
  ToProto(*job, resp->mutable_job());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DrainNode(grpc::ServerContext* ctx,
                                           const rpc::DrainNodeRequest* req,
                                           rpc::NodeResponse* resp) {
  if (absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.DrainNode"); !who.ok()) {
    return ToGrpc(who.status());
  }
  if (grpc::Status s = ToGrpc(ValidateName("node", req->node())); !s.ok()) return s;
  if (req->grace_period_s() < 0 || req->reason().size() > kMaxStringBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "grace_period_s must be >= 0 and reason at most 4096 bytes");
  }
  ATHANOR_LOG(INFO) << Who(security_.auth, ctx) << ": drain node " << req->node();
  std::string reason = req->reason().empty() ? "drained by " + Who(security_.auth, ctx) : req->reason();
  absl::StatusOr<NodeView> node =
      CoreCommands(core_).DrainNode(req->node(), Seconds(static_cast<double>(req->grace_period_s())), reason);
  if (!node.ok()) return ToGrpc(node.status());
  ToProto(*node, resp->mutable_node());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::UndrainNode(grpc::ServerContext* ctx,
                                             const rpc::UndrainNodeRequest* req,
                                             rpc::NodeResponse* resp) {
  if (absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.UndrainNode"); !who.ok()) {
    return ToGrpc(who.status());
  }
  if (grpc::Status s = ToGrpc(ValidateName("node", req->node())); !s.ok()) return s;
  ATHANOR_LOG(INFO) << Who(security_.auth, ctx) << ": undrain node " << req->node();
  absl::StatusOr<NodeView> node = CoreCommands(core_).UndrainNode(req->node());
  if (!node.ok()) return ToGrpc(node.status());
  ToProto(*node, resp->mutable_node());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Usage(grpc::ServerContext* ctx, const rpc::UsageRequest* req,
                                       rpc::UsageResponse* resp) {
  absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.Usage");
  if (!who.ok()) return ToGrpc(who.status());
  if (req->tenant().size() > kMaxStringBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "tenant: longer than 4096 bytes");
  }
  // Other tenants' usage is for admins: a user's is their own tenant's.
  const std::string tenant = TenantOfRead(*who, req->tenant());
  if (absl::Status s = security_.auth->CheckOwner(*who, "Coordinator.Usage", {.tenant = tenant});
      !s.ok()) {
    return ToGrpc(s);
  }
  for (const UsageRow& r : CoreReads(core_).Usage(tenant, static_cast<double>(req->since_unix()))) {
    rpc::UsageRow* row = resp->add_rows();
    row->set_tenant(r.tenant);
    row->set_job_id(r.job_id);
    row->set_gpu_seconds(r.gpu_seconds);
    row->set_gpus_in_use(r.gpus_in_use);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::WhyPending(grpc::ServerContext* ctx,
                                            const rpc::WhyPendingRequest* req,
                                            rpc::WhyPendingResponse* resp) {
  if (grpc::Status s = AuthorizeJob(*ctx, "Coordinator.WhyPending", req->job_id()); !s.ok()) return s;
  absl::StatusOr<WhyResult> why = CoreReads(core_).Why(req->job_id());
  if (!why.ok()) return ToGrpc(why.status());
  resp->set_job_id(req->job_id());
  resp->set_state(WireState(why->state));
  for (const std::string& r : why->reasons) resp->add_reasons(r);
  resp->set_queue_position(why->queue_position);
  return grpc::Status::OK;
}

namespace {

// `tenant` non-empty: that tenant's row only.
void QuotasToProto(const std::vector<QuotaRow>& rows, rpc::ListQuotasResponse* resp,
                   const std::string& tenant = "") {
  for (const QuotaRow& q : rows) {
    if (!tenant.empty() && q.tenant != tenant) continue;
    rpc::QuotaRow* row = resp->add_quotas();
    row->set_tenant(q.tenant);
    row->set_gpus(q.gpus);
    row->set_gpus_in_use(q.gpus_in_use);
  }
}

}  // namespace

grpc::Status CoordinatorService::SetQuota(grpc::ServerContext* ctx, const rpc::SetQuotaRequest* req,
                                          rpc::ListQuotasResponse* resp) {
  if (absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.SetQuota"); !who.ok()) {
    return ToGrpc(who.status());
  }
  ATHANOR_LOG(INFO) << Who(security_.auth, ctx) << ": quota " << req->tenant().substr(0, 64) << " = "
                    << req->gpus();
  absl::StatusOr<std::vector<QuotaRow>> rows = CoreCommands(core_).SetQuota(req->tenant(), req->gpus());
  if (!rows.ok()) return ToGrpc(rows.status());
  QuotasToProto(*rows, resp);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListQuotas(grpc::ServerContext* ctx, const rpc::ListQuotasRequest*,
                                            rpc::ListQuotasResponse* resp) {
  absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.ListQuotas");
  if (!who.ok()) return ToGrpc(who.status());
  // Users see their own tenant's quota only.
  QuotasToProto(CoreReads(core_).Quotas(), resp, SeesEveryTenant(*who) ? "" : who->tenant);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::StateStatus(grpc::ServerContext* ctx, const rpc::StateStatusRequest*,
                                             rpc::StateStatusResponse* resp) {
  if (absl::StatusOr<Identity> who = Authorize(*ctx, "Coordinator.StateStatus"); !who.ok()) {
    return ToGrpc(who.status());
  }
  if (!state_status_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this coordinator reports no state status");
  return ToGrpc(state_status_(resp));
}

}  // namespace athanor::coord
