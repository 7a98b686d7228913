#include "coordinator/observability/dashboard_rpc.h"

#include "absl/strings/str_cat.h"
#include "coordinator/wire/grpc_status.h"
#include "security/cluster_ca.h"
#include "security/tls.h"

namespace athanor::coord {
DashboardRpc::DashboardRpc(const std::string& target, const std::string& ca_pem,
                           std::chrono::milliseconds deadline)
    : deadline_(deadline) {
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!ca_pem.empty()) {
    security::TlsMaterial ca;
    ca.ca_pem = ca_pem;  // no client certificate: the caller's token is the identity
    creds = security::ClientCredentials(ca, security::kCoordinatorName, "", &args);
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, creds, args);
  stub_ = rpc::Coordinator::NewStub(channel);
  billing_ = rpc::Billing::NewStub(channel);
}

void DashboardRpc::Prepare(grpc::ClientContext* ctx, const std::string& authorization) const {
  ctx->set_deadline(std::chrono::system_clock::now() + deadline_);
  if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
}

std::string DashboardRpc::SelfTarget(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<rpc::Job> DashboardRpc::GetJob(const std::string& authorization, const std::string& job_id) {
  grpc::ClientContext ctx;
  Prepare(&ctx, authorization);
  rpc::GetJobRequest req;
  req.set_job_id(job_id);
  rpc::Job job;
  grpc::Status s = stub_->GetJob(&ctx, req, &job);
  if (!s.ok()) return FromGrpc(s);
  return job;
}

absl::StatusOr<rpc::ListJobsResponse> DashboardRpc::ListJobs(const std::string& authorization) {
  grpc::ClientContext ctx;
  Prepare(&ctx, authorization);
  rpc::ListJobsRequest req;
  rpc::ListJobsResponse resp;
  grpc::Status s = stub_->ListJobs(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<billing::Bill> DashboardRpc::GetBill(const std::string& authorization,
                                                    const std::string& tenant, const std::string& month) {
  grpc::ClientContext ctx;
  Prepare(&ctx, authorization);
  rpc::GetBillRequest req;
  req.set_tenant(tenant);
  req.set_month(month);
  billing::Bill bill;
  grpc::Status s = billing_->GetBill(&ctx, req, &bill);
  if (!s.ok()) return FromGrpc(s);
  return bill;
}

absl::StatusOr<rpc::ListBalancesResponse> DashboardRpc::ListBalances(const std::string& authorization) {
  grpc::ClientContext ctx;
  Prepare(&ctx, authorization);
  rpc::ListBalancesResponse resp;
  grpc::Status s = billing_->ListBalances(&ctx, rpc::ListBalancesRequest(), &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<nlohmann::json> DashboardRpc::LogTail(const std::string& authorization,
                                                     const std::string& job_id, int tail_bytes) {
  if (tail_bytes <= 0 || tail_bytes > kMaxTailBytes) {
    return absl::InvalidArgumentError(absl::StrCat("bytes: expected 1..", kMaxTailBytes));
  }
  grpc::ClientContext ctx;
  Prepare(&ctx, authorization);
  rpc::GetLogsRequest req;
  req.set_job_id(job_id);
  req.set_rank(-1);
  req.set_tail_bytes(tail_bytes);
  rpc::GetLogsResponse resp;
  grpc::Status s = stub_->GetLogs(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  nlohmann::json out{{"attempt", resp.attempt()}, {"logs", nlohmann::json::array()}};
  for (int i = 0; i < resp.logs_size() && i < kMaxRanks; ++i) {
    const rpc::RankLog& log = resp.logs(i);
    std::string tail = log.data();
    // A tail cut mid-line starts at the next whole line.
    if (static_cast<int>(tail.size()) >= tail_bytes) {
      size_t nl = tail.find('\n');
      if (nl != std::string::npos) tail.erase(0, nl + 1);
    }
    out["logs"].push_back({{"rank", log.rank()}, {"node", log.node()}, {"tail", tail}, {"error", log.error()}});
  }
  return out;
}

}  // namespace athanor::coord
