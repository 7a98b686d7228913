#include "coordinator/rpc/rpc_caller.h"

#include "common/logging.h"

namespace athanor::coord {

absl::StatusOr<Identity> AuthorizeCall(const Authorizer* auth, const grpc::ServerContextBase& ctx,
                                       absl::string_view method) {
  absl::StatusOr<Identity> who = auth->Check(ctx, method);
  if (!who.ok()) {
    ATHANOR_LOG(WARNING) << method << " refused: " << who.status().message();
  }
  return who;
}

std::string Caller(const grpc::ServerContextBase* ctx) {
  auto it = ctx->client_metadata().find("x-athanor-user");
  if (it == ctx->client_metadata().end()) return "";
  std::string user(it->second.data(), it->second.size());
  return user.size() > 256 ? user.substr(0, 256) : user;
}

std::string Who(const Authorizer* auth, const grpc::ServerContextBase* ctx) {
  absl::StatusOr<Identity> id = auth->Authenticate(*ctx);
  if (id.ok() && !id->insecure) return id->Describe();
  std::string user = Caller(ctx);
  return user.empty() ? "(anonymous)" : "user " + user + " (unauthenticated)";
}

bool SeesEveryTenant(const Identity& who) { return who.insecure || who.role == Role::kAdmin; }

std::string TenantOfRead(const Identity& who, const std::string& requested) {
  return requested.empty() && !SeesEveryTenant(who) ? who.tenant : requested;
}

}  // namespace athanor::coord
