// The Coordinator gRPC service (CLI and admin API): a thin edge that checks
// request fields, converts to plain records and calls CoordinatorCore.
// GetLogs reads the ranks' logs from their agents (agent_logs.h).
// Every handler first asks the Authorizer (auth_policy.h) whether the
// caller's identity may make the call, and about the job's tenant where one is
// involved; submissions also pass the SubmissionGuard (auth_submit.h). The
// `x-athanor-user` metadata is only logged (and, --insecure, the default
// tenant).
// Thread-safe (gRPC calls it from many threads). The core and everything in
// ServiceSecurity are not owned and outlive the service.
#pragma once

#include <functional>
#include <string>

#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/auth_setup.h"
#include "coordinator/auth/auth_submit.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/rpc/agent_logs.h"
#include "proto/athanor.grpc.pb.h"
#include "security/tls.h"

namespace athanor::coord {

// SubmitJob is served through gRPC's callback API: it is answered when the
// group commit makes the job durable, without a thread waiting for it.

class CoordinatorService final
    : public rpc::Coordinator::WithCallbackMethod_SubmitJob<rpc::Coordinator::Service> {
 public:
  // What StateStatus answers: the backend, and on etcd the election and the
  // cluster (main fills it; the core knows nothing of etcd). Called on a
  // gRPC thread; may block on etcd for its calls' deadlines.
  using StateStatusFn = std::function<absl::Status(rpc::StateStatusResponse*)>;

  CoordinatorService(CoordinatorCore* core, ServiceSecurity security, StateStatusFn state_status = nullptr)
      : core_(core), security_(security), logs_(security.agent_tls), state_status_(std::move(state_status)) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const rpc::SubmitJobRequest* req,
                                      rpc::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext*, const rpc::GetJobRequest* req, rpc::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*, const rpc::ListJobsRequest* req,
                        rpc::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext*, const rpc::CancelJobRequest* req,
                         rpc::CancelJobResponse* resp) override;
  grpc::Status ListNodes(grpc::ServerContext*, const rpc::ListNodesRequest* req,
                         rpc::ListNodesResponse* resp) override;
  grpc::Status GetLogs(grpc::ServerContext*, const rpc::GetLogsRequest* req,
                       rpc::GetLogsResponse* resp) override;
  grpc::Status PreemptJob(grpc::ServerContext*, const rpc::PreemptJobRequest* req,
                          rpc::PreemptJobResponse* resp) override;
  grpc::Status DrainNode(grpc::ServerContext*, const rpc::DrainNodeRequest* req,
                         rpc::NodeResponse* resp) override;
  grpc::Status UndrainNode(grpc::ServerContext*, const rpc::UndrainNodeRequest* req,
                           rpc::NodeResponse* resp) override;
  grpc::Status Usage(grpc::ServerContext*, const rpc::UsageRequest* req,
                     rpc::UsageResponse* resp) override;
  grpc::Status WhyPending(grpc::ServerContext*, const rpc::WhyPendingRequest* req,
                          rpc::WhyPendingResponse* resp) override;
  grpc::Status SetQuota(grpc::ServerContext*, const rpc::SetQuotaRequest* req,
                        rpc::ListQuotasResponse* resp) override;
  grpc::Status ListQuotas(grpc::ServerContext*, const rpc::ListQuotasRequest* req,
                          rpc::ListQuotasResponse* resp) override;
  // Admins only: where the state lives and who leads.
  grpc::Status StateStatus(grpc::ServerContext*, const rpc::StateStatusRequest* req,
                           rpc::StateStatusResponse* resp) override;

 private:
  // Authorizer::Check, and for a job, CheckOwner against its tenant.
  absl::StatusOr<Identity> Authorize(const grpc::ServerContextBase& ctx, absl::string_view method);
  grpc::Status AuthorizeJob(const grpc::ServerContextBase& ctx, absl::string_view method,
                            const std::string& job_id, JobRecord* job = nullptr);

  CoordinatorCore* const core_;
  const ServiceSecurity security_;
  AgentLogReader logs_;
  const StateStatusFn state_status_;
};

}  // namespace athanor::coord
