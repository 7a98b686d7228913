// Who is calling, as the gRPC edges (coordinator_service.h, billing_service.h)
// ask it: the policy check with its refusal logged once, the caller named for
// the log, and the tenant a user's read is about. Thread-safe; the authorizer
// is not owned.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/auth/auth_policy.h"

namespace athanor::coord {

// Authorizer::Check; a refusal is logged here, with its reason.
absl::StatusOr<Identity> AuthorizeCall(const Authorizer* auth, const grpc::ServerContextBase& ctx,
                                       absl::string_view method);

// The caller's x-athanor-user metadata, at most 256 bytes ("" when absent).
// Claimed by the client, never proven: for logs and --insecure only.
std::string Caller(const grpc::ServerContextBase* ctx);

// For logs: the caller's proven identity (never the metadata alone).
std::string Who(const Authorizer* auth, const grpc::ServerContextBase* ctx);

// Whether `who` reads every tenant's records (an admin, or --insecure).
bool SeesEveryTenant(const Identity& who);

// The tenant a read is about: `requested`, or when that is empty and `who`
// is a user, its own. The ownership rule (Authorizer::CheckOwner) still
// decides whether `who` may read it.
std::string TenantOfRead(const Identity& who, const std::string& requested);

}  // namespace athanor::coord
