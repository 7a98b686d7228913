#include "coordinator/auth/auth_service.h"

#include "common/logging.h"
#include "coordinator/auth/auth_convert.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

void PoliciesToProto(const std::vector<TenantPolicy>& policies, rpc::ListTenantPoliciesResponse* resp) {
  for (const TenantPolicy& p : policies) ToProto(p, resp->add_policies());
}

}  // namespace

grpc::Status SecurityService::CreateToken(grpc::ServerContext* ctx,
                                          const rpc::CreateTokenRequest* req,
                                          rpc::CreateTokenResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.CreateToken");
  if (!who.ok()) return ToGrpc(who.status());
  Role role = Role::kUser;
  if (!req->role().empty() && !ParseRole(req->role(), &role)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "role: must be 'user' or 'admin'");
  }
  absl::StatusOr<TokenStore::Created> made =
      tokens_->Create(req->tenant(), role, req->ttl_s(), req->description());
  if (!made.ok()) return ToGrpc(made.status());
  ATHANOR_LOG(INFO) << who->Describe() << ": created " << RoleName(role) << " token "
                    << made->record.id << " for tenant " << made->record.tenant;
  resp->set_token(made->token);
  ToProto(made->record, resp->mutable_info());
  return grpc::Status::OK;
}

grpc::Status SecurityService::ListTokens(grpc::ServerContext* ctx, const rpc::ListTokensRequest* req,
                                         rpc::ListTokensResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.ListTokens");
  if (!who.ok()) return ToGrpc(who.status());
  for (const TokenRecord& t : tokens_->List(req->tenant())) ToProto(t, resp->add_tokens());
  return grpc::Status::OK;
}

grpc::Status SecurityService::RevokeToken(grpc::ServerContext* ctx,
                                          const rpc::RevokeTokenRequest* req,
                                          rpc::RevokeTokenResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.RevokeToken");
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<TokenRecord> t = tokens_->Revoke(req->id());
  if (!t.ok()) return ToGrpc(t.status());
  ATHANOR_LOG(INFO) << who->Describe() << ": revoked token " << t->id;
  ToProto(*t, resp->mutable_info());
  return grpc::Status::OK;
}

grpc::Status SecurityService::SetTenantPolicy(grpc::ServerContext* ctx,
                                              const rpc::SetTenantPolicyRequest* req,
                                              rpc::ListTenantPoliciesResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.SetTenantPolicy");
  if (!who.ok()) return ToGrpc(who.status());
  // The whole policy is replaced (`admin tenant set` sends what it read,
  // with the flags given applied).
  absl::Status s = tokens_->SetPolicy(FromProto(req->policy()));
  if (!s.ok()) return ToGrpc(s);
  ATHANOR_LOG(INFO) << who->Describe() << ": tenant " << req->policy().tenant()
                    << " max priority " << req->policy().max_priority() << ", volumes at most "
                    << req->policy().max_volume_bytes() << " bytes and " << req->policy().max_volumes()
                    << " volumes (0: the defaults)";
  PoliciesToProto(tokens_->PolicyList(), resp);
  return grpc::Status::OK;
}

grpc::Status SecurityService::ListTenantPolicies(grpc::ServerContext* ctx,
                                                 const rpc::ListTenantPoliciesRequest*,
                                                 rpc::ListTenantPoliciesResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.ListTenantPolicies");
  if (!who.ok()) return ToGrpc(who.status());
  PoliciesToProto(tokens_->PolicyList(), resp);
  return grpc::Status::OK;
}

grpc::Status SecurityService::SetTenantCredentials(grpc::ServerContext* ctx,
                                                   const rpc::SetTenantCredentialsRequest* req,
                                                   rpc::ListTenantCredentialsResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.SetTenantCredentials");
  if (!who.ok()) return ToGrpc(who.status());
  const rpc::TenantCredentials& c = req->credentials();
  absl::Status s = secrets_->Set(req->tenant(), FromProto(c));
  if (!s.ok()) return ToGrpc(s);
  // The tenant only: never the credentials.
  ATHANOR_LOG(INFO) << who->Describe() << ": " << (c.access_key().empty() ? "removed" : "set")
                    << " store credentials of tenant " << req->tenant();
  for (const std::string& t : secrets_->Tenants()) resp->add_tenants(t);
  return grpc::Status::OK;
}

grpc::Status SecurityService::ListTenantCredentials(grpc::ServerContext* ctx,
                                                    const rpc::ListTenantCredentialsRequest*,
                                                    rpc::ListTenantCredentialsResponse* resp) {
  absl::StatusOr<Identity> who = auth_->Check(*ctx, "Security.ListTenantCredentials");
  if (!who.ok()) return ToGrpc(who.status());
  for (const std::string& t : secrets_->Tenants()) resp->add_tenants(t);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
