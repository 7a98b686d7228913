// InteractiveService's snapshot calls (interactive_service.h): a tenant's
// instance snapshots, listed and deleted (docs/operations.md, "Snapshots").
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/core/core_snapshots.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/interactive_service.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/rpc/workdir_data_service.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {

grpc::Status InteractiveService::ListSnapshots(grpc::ServerContext* ctx, const rpc::ListSnapshotsRequest* req,
                                               rpc::ListSnapshotsResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(deps_.auth, *ctx, "Interactive.ListSnapshots");
  if (!who.ok()) return ToGrpc(who.status());
  if (req->tenant().size() > kMaxStringBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "tenant: longer than 4096 bytes");
  }
  std::string tenant = req->tenant();  // "" for an admin: every tenant's
  if (!SeesEveryTenant(*who)) {
    tenant = TenantOfRead(*who, req->tenant());
    if (absl::Status s = deps_.auth->CheckOwner(*who, "Interactive.ListSnapshots", {.tenant = tenant}); !s.ok()) {
      return ToGrpc(s);
    }
  }
  for (rpc::InstanceSnapshot& s : CoreSnapshots(deps_.core).List(tenant)) *resp->add_snapshots() = std::move(s);
  return grpc::Status::OK;
}

grpc::Status InteractiveService::DeleteSnapshot(grpc::ServerContext* ctx, const rpc::DeleteSnapshotRequest* req,
                                                rpc::InstanceSnapshot* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(deps_.auth, *ctx, "Interactive.DeleteSnapshot");
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = ValidateName("id", req->id()); !s.ok()) return ToGrpc(s);
  // A user reaches only its own tenant's; another's reads as absent.
  const std::string tenant = SeesEveryTenant(*who) ? "" : TenantOfRead(*who, "");
  absl::StatusOr<rpc::InstanceSnapshot> removed = CoreSnapshots(deps_.core).Remove(tenant, req->id());
  if (!removed.ok()) return ToGrpc(removed.status());
  ATHANOR_LOG(INFO) << Who(deps_.auth, ctx) << ": deleted snapshot " << removed->id() << " of tenant "
                    << removed->tenant();
  if (deps_.data != nullptr) DeleteSnapshotOrphans(deps_.core, deps_.data);
  *resp = *std::move(removed);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
