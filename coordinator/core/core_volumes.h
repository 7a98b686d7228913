// CoreVolumes: volumes' commands and queries on the running coordinator.
// Commands run under the state lock and return once what they changed is
// durable (CoordinatorCore::Write); queries read one consistent view
// (CoordinatorCore::Read). Content (the data store's blobs) is the RPC
// layer's: rpc/volumes_service.h and rpc/node_data_volumes.cc move it around
// these calls, blob first, record second.
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/cluster_volumes.h"
#include "coordinator/core/coordinator_core.h"

namespace athanor::coord {

class CoreVolumes {
 public:
  explicit CoreVolumes(CoordinatorCore* core) : core_(core) {}

  absl::StatusOr<rpc::Volume> Create(const std::string& tenant, const std::string& name,
                                     int64_t size_limit_bytes, const VolumeQuota& quota);
  absl::StatusOr<rpc::Volume> Remove(const std::string& tenant, const std::string& name);
  absl::StatusOr<rpc::Volume> Snapshot(const std::string& tenant, const std::string& name,
                                       const std::string& snapshot);
  // One tenant's ("" : every tenant's), `used_by` filled in.
  std::vector<rpc::Volume> List(const std::string& tenant) const;
  // nullopt-like NotFound when `tenant` has no volume `name`.
  absl::StatusOr<rpc::Volume> Get(const std::string& tenant, const std::string& name) const;

  // Agents (ClusterVolumes' rules).
  absl::StatusOr<rpc::Volume> ForFetch(const std::string& node, const std::string& job_id, int32_t attempt,
                                       const std::string& volume) const;
  absl::StatusOr<VolumeUpload> ReserveStore(const std::string& node, const std::string& job_id,
                                            int32_t attempt, const std::string& volume,
                                            int64_t base_generation);
  absl::StatusOr<rpc::Volume> CommitStore(const std::string& volume, const VolumeUpload& upload,
                                          int64_t base_generation, const std::string& digest,
                                          int64_t size_bytes);
  // A StoreVolume call ended, whatever its outcome (ClusterVolumes::EndStore).
  absl::Status EndStore(const std::string& node, const std::string& job_id, int32_t attempt,
                        const std::string& volume);

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
