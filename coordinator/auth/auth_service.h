// The Security gRPC service: admins create, list and revoke bearer tokens and
// set tenants' maximum priorities. Every call is checked by the Authorizer
// (admins only, auth_policy.cc). Token hashes and salts never leave the
// coordinator; a new token's secret is returned once and not logged.
// Thread-safe; the authorizer and store are not owned and outlive it.
#pragma once

#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/secret_store.h"
#include "coordinator/auth/token_store.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class SecurityService final : public rpc::Security::Service {
 public:
  SecurityService(const Authorizer* auth, TokenStore* tokens, SecretStore* secrets)
      : auth_(auth), tokens_(tokens), secrets_(secrets) {}

  grpc::Status CreateToken(grpc::ServerContext* ctx, const rpc::CreateTokenRequest* req,
                           rpc::CreateTokenResponse* resp) override;
  grpc::Status ListTokens(grpc::ServerContext* ctx, const rpc::ListTokensRequest* req,
                          rpc::ListTokensResponse* resp) override;
  grpc::Status RevokeToken(grpc::ServerContext* ctx, const rpc::RevokeTokenRequest* req,
                           rpc::RevokeTokenResponse* resp) override;
  grpc::Status SetTenantPolicy(grpc::ServerContext* ctx, const rpc::SetTenantPolicyRequest* req,
                               rpc::ListTenantPoliciesResponse* resp) override;
  grpc::Status ListTenantPolicies(grpc::ServerContext* ctx, const rpc::ListTenantPoliciesRequest* req,
                                  rpc::ListTenantPoliciesResponse* resp) override;
  grpc::Status SetTenantCredentials(grpc::ServerContext* ctx, const rpc::SetTenantCredentialsRequest* req,
                                    rpc::ListTenantCredentialsResponse* resp) override;
  grpc::Status ListTenantCredentials(grpc::ServerContext* ctx, const rpc::ListTenantCredentialsRequest* req,
                                     rpc::ListTenantCredentialsResponse* resp) override;

 private:
  const Authorizer* const auth_;
  TokenStore* const tokens_;
  SecretStore* const secrets_;
};

}  // namespace athanor::coord
