#include "coordinator/auth/auth_policy.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "security/tls.h"

namespace athanor::coord {
namespace {

// RPC × role × owner. One line per RPC; absent means denied.
//                 method                          user   admin  agent  owner
constexpr AuthRule kRules[] = {
    // The CLI's API: users act on their own tenant's jobs only.
    {"Coordinator.SubmitJob",          true,  true,  false, Owner::kTenant},
    {"Coordinator.GetJob",             true,  true,  false, Owner::kTenant},
    {"Coordinator.ListJobs",           true,  true,  false, Owner::kTenant},
    {"Coordinator.CancelJob",          true,  true,  false, Owner::kTenant},
    {"Coordinator.GetLogs",            true,  true,  false, Owner::kTenant},
    {"Coordinator.WhyPending",         true,  true,  false, Owner::kTenant},
    {"Coordinator.Usage",              true,  true,  false, Owner::kTenant},
    {"Coordinator.ListQuotas",         true,  true,  false, Owner::kTenant},
    {"Coordinator.ListNodes",          true,  true,  false, Owner::kNone},
    // Admin verbs.
    {"Coordinator.PreemptJob",         false, true,  false, Owner::kNone},
    {"Coordinator.DrainNode",          false, true,  false, Owner::kNone},
    {"Coordinator.UndrainNode",        false, true,  false, Owner::kNone},
    {"Coordinator.SetQuota",           false, true,  false, Owner::kNone},
    {"Coordinator.StateStatus",        false, true,  false, Owner::kNone},
    {"Security.CreateToken",           false, true,  false, Owner::kNone},
    {"Security.ListTokens",            false, true,  false, Owner::kNone},
    {"Security.RevokeToken",           false, true,  false, Owner::kNone},
    {"Security.SetTenantPolicy",       false, true,  false, Owner::kNone},
    {"Security.ListTenantPolicies",    false, true,  false, Owner::kNone},
    {"Security.SetTenantCredentials",  false, true,  false, Owner::kNone},
    {"Security.ListTenantCredentials", false, true,  false, Owner::kNone},
    // Agents: only with their node's certificate, only about their node.
    {"NodeAgent.RegisterNode",         false, false, true,  Owner::kOwnNode},
    {"NodeAgent.Heartbeat",            false, false, true,  Owner::kOwnNode},
    {"NodeAgent.ReportCheckpoint",     false, false, true,  Owner::kJobOnOwnNode},
    // A node's checkpoint service speaks with its agent's certificate.
    {"CheckpointCommit.ReportShardDurable", false, false, true, Owner::kJobOnOwnNode},
    {"CheckpointCommit.ReportShardUpload", false, false, true, Owner::kJobOnOwnNode},
    // Read-only views (athanor top): users see their own tenant's jobs only.
    {"Observability.GetClusterView",   true,  true,  false, Owner::kTenant},
    {"Observability.GetJobTelemetry",  true,  true,  false, Owner::kTenant},
    // Billing: prices are public; a user reads its own tenant's bill and
    // balance only; prices, plans, credit and the ledger are an admin's.
    {"Billing.ListPrices",             true,  true,  false, Owner::kNone},
    {"Billing.GetBill",                true,  true,  false, Owner::kTenant},
    {"Billing.ListBalances",           true,  true,  false, Owner::kTenant},
    {"Billing.SetPrice",               false, true,  false, Owner::kNone},
    {"Billing.SetPlan",                false, true,  false, Owner::kNone},
    {"Billing.ListPlans",              false, true,  false, Owner::kNone},
    {"Billing.AddCredit",              false, true,  false, Owner::kNone},
    {"Billing.ListLedger",             false, true,  false, Owner::kNone},
    // Images: a user imports, lists and removes its own tenant's (and sees
    // the public ones); publishing and other tenants' are an admin's
    // (images_service.h). Agents fetch an image's content for their node's
    // ranks only (node_data_service.h checks the desired ranks).
    {"Images.ImportImage",             true,  true,  false, Owner::kTenant},
    {"Images.ListImages",              true,  true,  false, Owner::kTenant},
    {"Images.RemoveImage",             true,  true,  false, Owner::kTenant},
    {"NodeData.FetchImage",            false, false, true,  Owner::kNone},
    // Volumes: a user's own tenant's (admins: list and remove any tenant's,
    // volumes_service.h). Agents move a volume's content only for a job
    // placed on their node that mounts it (core/cluster_volumes.h checks).
    {"Volumes.CreateVolume",           true,  true,  false, Owner::kTenant},
    {"Volumes.ListVolumes",            true,  true,  false, Owner::kTenant},
    {"Volumes.RemoveVolume",           true,  true,  false, Owner::kTenant},
    {"Volumes.SnapshotVolume",         true,  true,  false, Owner::kTenant},
    {"NodeData.FetchVolume",           false, false, true,  Owner::kNone},
    {"NodeData.StoreVolume",           false, false, true,  Owner::kNone},
    // Interactive instances: a user's own tenant's jobs and snapshots
    // (admins: any; interactive_service.h checks the job's tenant). Agents
    // store and fetch an interactive allocation's work dir for their node's
    // ranks only.
    {"Interactive.Shell",              true,  true,  false, Owner::kTenant},
    {"Interactive.KeepInstance",       true,  true,  false, Owner::kTenant},
    {"Interactive.ListSnapshots",      true,  true,  false, Owner::kTenant},
    {"Interactive.DeleteSnapshot",     true,  true,  false, Owner::kTenant},
    {"WorkdirData.StoreWorkdir",       false, false, true,  Owner::kNone},
    {"WorkdirData.FetchWorkdir",       false, false, true,  Owner::kNone},
};

constexpr char kBearer[] = "Bearer ";

}  // namespace

const AuthRule* FindAuthRule(absl::string_view method) {
  for (const AuthRule& r : kRules) {
    if (r.method == method) return &r;
  }
  return nullptr;
}

const AuthRule* AuthRulesBegin() { return std::begin(kRules); }
const AuthRule* AuthRulesEnd() { return std::end(kRules); }

absl::StatusOr<Identity> Authorizer::Authenticate(const grpc::ServerContextBase& ctx) const {
  Identity id;
  if (insecure_) {
    id.insecure = true;
    return id;
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth != nullptr) {
    if (std::optional<std::string> node = security::PeerNode(*auth)) id.node = *node;
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    std::string value(it->second.data(), std::min<size_t>(it->second.size(), 512));
    if (!absl::StartsWith(value, kBearer)) {
      return absl::UnauthenticatedError("authorization: expected 'Bearer <token>'");
    }
    absl::StatusOr<Identity> token = tokens_->Authenticate(value.substr(sizeof(kBearer) - 1));
    if (!token.ok()) return token.status();
    token->node = id.node;
    id = *token;
  }
  if (id.role == Role::kNone && id.node.empty()) {
    return absl::UnauthenticatedError(
        "no credentials: send a bearer token (ATHANOR_TOKEN or --token-file) over TLS");
  }
  return id;
}

absl::StatusOr<Identity> Authorizer::Check(const grpc::ServerContextBase& ctx,
                                           absl::string_view method) const {
  const AuthRule* rule = FindAuthRule(method);
  absl::StatusOr<Identity> id = Authenticate(ctx);
  if (!id.ok()) return id.status();
  if (id->insecure) return id;
  if (rule == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " is not in the authorisation table: denied"));
  }
  bool allowed = (rule->user && (id->role == Role::kUser || id->role == Role::kAdmin)) ||
                 (rule->admin && id->role == Role::kAdmin) || (rule->agent && !id->node.empty());
  if (allowed) return id;
  const char* who = rule->agent && !rule->user && !rule->admin ? "agents (with their node's certificate)"
                    : !rule->user                              ? "admins"
                                                               : "users and admins";
  return absl::PermissionDeniedError(
      absl::StrCat(method, " is for ", who, " only; the caller is ", id->Describe()));
}

absl::Status Authorizer::CheckOwner(const Identity& who, absl::string_view method,
                                    const AuthTarget& target) const {
  if (who.insecure) return absl::OkStatus();
  const AuthRule* rule = FindAuthRule(method);
  if (rule == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(method, " is not in the authorisation table: denied"));
  }
  switch (rule->owner) {
    case Owner::kNone:
      return absl::OkStatus();
    case Owner::kTenant:
      if (who.role == Role::kAdmin || target.tenant == who.tenant) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          method, ": tenant '", target.tenant.substr(0, 128), "' is not the caller's (", who.Describe(), ")"));
    case Owner::kOwnNode:
      if (!who.node.empty() && target.node == who.node) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          method, ": node '", target.node.substr(0, 128), "' is not the caller's certificate's (",
          who.Describe(), ")"));
    case Owner::kJobOnOwnNode:
      if (!who.node.empty() &&
          std::find(target.nodes.begin(), target.nodes.end(), who.node) != target.nodes.end()) {
        return absl::OkStatus();
      }
      return absl::PermissionDeniedError(absl::StrCat(
          method, ": the job has no rank on the caller's node (", who.Describe(), ")"));
  }
  return absl::PermissionDeniedError(absl::StrCat(method, ": unknown ownership rule"));
}

}  // namespace athanor::coord
