#include "coordinator/core/core_volumes.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::StatusOr<rpc::Volume> CoreVolumes::Create(const std::string& tenant, const std::string& name,
                                                int64_t size_limit_bytes, const VolumeQuota& quota) {
  rpc::Volume out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.volumes().Create(tenant, name, size_limit_bytes, quota));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<rpc::Volume> CoreVolumes::Remove(const std::string& tenant, const std::string& name) {
  rpc::Volume out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.volumes().Remove(tenant, name));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<rpc::Volume> CoreVolumes::Snapshot(const std::string& tenant, const std::string& name,
                                                  const std::string& snapshot) {
  rpc::Volume out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.volumes().Snapshot(tenant, name, snapshot));
    return absl::OkStatus();
  }));
  return out;
}

std::vector<rpc::Volume> CoreVolumes::List(const std::string& tenant) const {
  std::vector<rpc::Volume> out;
  core_->Read([&](const ClusterState& s) { out = ClusterVolumes::List(s, tenant); });
  return out;
}

absl::StatusOr<rpc::Volume> CoreVolumes::Get(const std::string& tenant, const std::string& name) const {
  for (rpc::Volume& v : List(tenant)) {
    if (v.name() == name) return std::move(v);
  }
  return absl::NotFoundError(absl::StrCat("tenant ", tenant, " has no volume '", name, "'"));
}

absl::StatusOr<rpc::Volume> CoreVolumes::ForFetch(const std::string& node, const std::string& job_id,
                                                  int32_t attempt, const std::string& volume) const {
  absl::StatusOr<rpc::Volume> out = absl::UnknownError("not read");
  core_->Read([&](const ClusterState& s) { out = ClusterVolumes::ForFetch(s, node, job_id, attempt, volume); });
  return out;
}

absl::StatusOr<VolumeUpload> CoreVolumes::ReserveStore(const std::string& node, const std::string& job_id,
                                                       int32_t attempt, const std::string& volume,
                                                       int64_t base_generation) {
  VolumeUpload out;
  // Reserving marks no record: the write commits nothing and returns at once.
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.volumes().ReserveStore(node, job_id, attempt, volume, base_generation));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<rpc::Volume> CoreVolumes::CommitStore(const std::string& volume, const VolumeUpload& upload,
                                                     int64_t base_generation, const std::string& digest,
                                                     int64_t size_bytes) {
  rpc::Volume out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.volumes().CommitStore(volume, upload, base_generation, digest, size_bytes));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status CoreVolumes::EndStore(const std::string& node, const std::string& job_id, int32_t attempt,
                                   const std::string& volume) {
  // Marks no record unless a held job starts now.
  return core_->Write([&](ClusterState& s) { return s.volumes().EndStore(node, job_id, attempt, volume); });
}

}  // namespace athanor::coord
