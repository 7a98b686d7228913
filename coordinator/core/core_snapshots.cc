#include "coordinator/core/core_snapshots.h"

#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

std::vector<rpc::InstanceSnapshot> CoreSnapshots::List(const std::string& tenant) const {
  std::vector<rpc::InstanceSnapshot> out;
  core_->Read([&](const ClusterState& s) { out = ClusterSnapshots::List(s, tenant); });
  return out;
}

absl::StatusOr<rpc::InstanceSnapshot> CoreSnapshots::Remove(const std::string& tenant, const std::string& id) {
  rpc::InstanceSnapshot out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.snapshots().Remove(tenant, id));
    return absl::OkStatus();
  }));
  return out;
}

std::vector<std::string> CoreSnapshots::TakeOrphans() {
  std::vector<std::string> out;
  // Marks no record: the write commits nothing and returns at once.
  core_->Write([&](ClusterState& s) {
         out = s.snapshots().TakeOrphans();
         return absl::OkStatus();
       })
      .IgnoreError();
  return out;
}

absl::StatusOr<WorkdirUpload> CoreSnapshots::ForStore(const std::string& node, const std::string& job_id,
                                                      int32_t attempt, int32_t rank, const std::string& key) const {
  absl::StatusOr<WorkdirUpload> out = absl::UnknownError("not read");
  core_->Read([&](const ClusterState& s) {
    out = ClusterSnapshots::ForStore(s, node, job_id, attempt, rank, key);
  });
  return out;
}

absl::StatusOr<rpc::InstanceSnapshot> CoreSnapshots::WorkdirStored(const std::string& snapshot_id, int32_t rank,
                                                                   int64_t size_bytes) {
  rpc::InstanceSnapshot out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out, s.snapshots().WorkdirStored(snapshot_id, rank, size_bytes));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status CoreSnapshots::ForFetch(const std::string& node, const std::string& job_id, int32_t attempt,
                                     int32_t rank, const std::string& key) const {
  absl::Status out = absl::UnknownError("not read");
  core_->Read([&](const ClusterState& s) {
    out = ClusterSnapshots::ForFetch(s, node, job_id, attempt, rank, key);
  });
  return out;
}

}  // namespace athanor::coord
