#include "coordinator/rpc/volumes_service.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

// The caller's own tenant: its token's, or with --insecure the claimed user.
absl::StatusOr<std::string> OwnTenant(const Identity& who, const grpc::ServerContext* ctx) {
  const std::string tenant = who.insecure ? Caller(ctx) : who.tenant;
  if (tenant.empty()) return absl::InvalidArgumentError("tenant: the caller has none");
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  return tenant;
}

}  // namespace

absl::Status DeleteVolumeBlobs(ObjectStore* data, const rpc::Volume& volume) {
  absl::Status first;
  for (int64_t g : VolumeRegistry::Blobs(volume)) {
    absl::Status s = data->Delete(VolumeBlobKey(volume.tenant(), volume.name(), g));
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::StatusOr<int> SweepVolumeBlobs(ObjectStore* data, const std::vector<rpc::Volume>& volumes) {
  std::set<std::string> keep;
  for (const rpc::Volume& v : volumes) {
    for (int64_t g : VolumeRegistry::Blobs(v)) keep.insert(VolumeBlobKey(v.tenant(), v.name(), g));
  }
  ASSIGN_OR_RETURN(std::vector<ObjectInfo> all, data->List("volumes/"));
  int deleted = 0;
  for (const ObjectInfo& o : all) {
    if (keep.count(o.key)) continue;
    RETURN_IF_ERROR(data->Delete(o.key));
    ++deleted;
  }
  return deleted;
}

VolumeQuota VolumesService::QuotaOf(const std::string& tenant) const {
  VolumeQuota q = defaults_;
  if (tokens_ == nullptr) return q;  // tests without a token store
  const TenantPolicy p = tokens_->PolicyOf(tenant);
  if (p.max_volume_bytes > 0) q.max_bytes = p.max_volume_bytes;
  if (p.max_volumes > 0) q.max_count = p.max_volumes;
  return q;
}

grpc::Status VolumesService::CreateVolume(grpc::ServerContext* ctx, const rpc::CreateVolumeRequest* req,
                                          rpc::Volume* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Volumes.CreateVolume");
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::string> tenant = OwnTenant(*who, ctx);
  if (!tenant.ok()) return ToGrpc(tenant.status());
  if (req->size_limit_bytes() <= 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "size_limit_bytes: required, above 0 (--size)");
  }
  absl::StatusOr<rpc::Volume> v =
      volumes_.Create(*tenant, req->name(), req->size_limit_bytes(), QuotaOf(*tenant));
  if (!v.ok()) return ToGrpc(v.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": created volume " << v->tenant() << "/" << v->name() << " of "
                    << v->size_limit_bytes() << " bytes";
  *resp = *std::move(v);
  return grpc::Status::OK;
}

grpc::Status VolumesService::ListVolumes(grpc::ServerContext* ctx, const rpc::ListVolumesRequest* req,
                                         rpc::ListVolumesResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Volumes.ListVolumes");
  if (!who.ok()) return ToGrpc(who.status());
  if (req->tenant().size() > kMaxStringBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "tenant: longer than 4096 bytes");
  }
  std::string tenant = req->tenant();
  if (!SeesEveryTenant(*who)) {
    tenant = TenantOfRead(*who, req->tenant());
    if (absl::Status s = auth_->CheckOwner(*who, "Volumes.ListVolumes", {.tenant = tenant}); !s.ok()) {
      return ToGrpc(s);
    }
  }
  for (rpc::Volume& v : volumes_.List(tenant)) *resp->add_volumes() = std::move(v);
  return grpc::Status::OK;
}

grpc::Status VolumesService::RemoveVolume(grpc::ServerContext* ctx, const rpc::RemoveVolumeRequest* req,
                                          rpc::Volume* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Volumes.RemoveVolume");
  if (!who.ok()) return ToGrpc(who.status());
  std::string tenant = req->tenant();
  if (tenant.empty()) {
    absl::StatusOr<std::string> own = OwnTenant(*who, ctx);
    if (!own.ok()) return ToGrpc(own.status());
    tenant = *own;
  }
  if (grpc::Status s = ToGrpc(ValidateName("tenant", tenant)); !s.ok()) return s;
  if (absl::Status s = auth_->CheckOwner(*who, "Volumes.RemoveVolume", {.tenant = tenant}); !s.ok()) {
    return ToGrpc(s);
  }
  absl::StatusOr<rpc::Volume> v = volumes_.Remove(tenant, req->name());
  if (!v.ok()) return ToGrpc(v.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": removed volume " << tenant << "/" << v->name();
  // The record is gone (durably): its blobs can no longer be reached.
  if (absl::Status s = DeleteVolumeBlobs(data_, *v); !s.ok()) {
    ATHANOR_LOG(WARNING) << "volume " << tenant << "/" << v->name() << " removed, but not all of its content in "
                         << data_->Describe() << ": " << s;
  }
  *resp = *std::move(v);
  return grpc::Status::OK;
}

grpc::Status VolumesService::SnapshotVolume(grpc::ServerContext* ctx, const rpc::SnapshotVolumeRequest* req,
                                            rpc::Volume* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Volumes.SnapshotVolume");
  if (!who.ok()) return ToGrpc(who.status());
  absl::StatusOr<std::string> tenant = OwnTenant(*who, ctx);
  if (!tenant.ok()) return ToGrpc(tenant.status());
  absl::StatusOr<rpc::Volume> v = volumes_.Snapshot(*tenant, req->name(), req->snapshot());
  if (!v.ok()) return ToGrpc(v.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": snapshot " << req->snapshot() << " of volume " << *tenant << "/"
                    << v->name() << " at generation " << v->generation();
  *resp = *std::move(v);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
