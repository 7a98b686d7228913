// The Volumes gRPC service: tenants' persistent volumes (docs/operations.md,
// "Volumes"). A thin edge over CoreVolumes and the data store:
//   - CreateVolume: a new, empty volume of the caller's tenant; its size
//     limit is required (> 0) and within the tenant's quota (the tenant's
//     policy, else --volume-quota-bytes / --volume-quota-count);
//   - ListVolumes: a user its own tenant's; an admin one tenant's or, naming
//     none, every tenant's;
//   - RemoveVolume: refused (FailedPrecondition naming the jobs) while a
//     queued or running job mounts it; once the record is gone, its blobs are
//     deleted (a failure is logged: an unreferenced blob is only space);
//   - SnapshotVolume: a named record of the current generation, keeping its
//     blob.
// Every change is logged with who made it.
//
// Thread-safe (gRPC calls it from many threads). The core, the authorizer,
// the token store and the data store are not owned and outlive the service.
#pragma once

#include <string>

#include "checkpoint/object_store.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/token_store.h"
#include "coordinator/core/core_volumes.h"
#include "proto/athanor_data.grpc.pb.h"

namespace athanor::coord {

class VolumesService final : public rpc::Volumes::Service {
 public:
  VolumesService(CoordinatorCore* core, const Authorizer* auth, const TokenStore* tokens, ObjectStore* data,
                 VolumeQuota defaults)
      : volumes_(core), auth_(auth), tokens_(tokens), data_(data), defaults_(defaults) {}

  grpc::Status CreateVolume(grpc::ServerContext* ctx, const rpc::CreateVolumeRequest* req,
                            rpc::Volume* resp) override;
  grpc::Status ListVolumes(grpc::ServerContext* ctx, const rpc::ListVolumesRequest* req,
                           rpc::ListVolumesResponse* resp) override;
  grpc::Status RemoveVolume(grpc::ServerContext* ctx, const rpc::RemoveVolumeRequest* req,
                            rpc::Volume* resp) override;
  grpc::Status SnapshotVolume(grpc::ServerContext* ctx, const rpc::SnapshotVolumeRequest* req,
                              rpc::Volume* resp) override;

  // The quota of `tenant`: its policy's fields where set, else the defaults.
  VolumeQuota QuotaOf(const std::string& tenant) const;

 private:
  CoreVolumes volumes_;
  const Authorizer* const auth_;
  const TokenStore* const tokens_;
  ObjectStore* const data_;
  const VolumeQuota defaults_;
};

// Deletes every blob `volume` references (VolumeRegistry::Blobs); the
// first error, after trying them all.
absl::Status DeleteVolumeBlobs(ObjectStore* data, const rpc::Volume& volume);

// At start, before any agent stores: deletes the blobs under volumes/ that
// no record of `volumes` references (a coordinator that died between a
// blob's write and its commit, or before deleting a replaced one). Returns
// how many it deleted; the first error of the listing or a deletion.
absl::StatusOr<int> SweepVolumeBlobs(ObjectStore* data, const std::vector<rpc::Volume>& volumes);

}  // namespace athanor::coord
