// CoreSnapshots: instance snapshots' commands and queries on the running
// coordinator. Commands run under the state lock and return once what they
// changed is durable (CoordinatorCore::Write); queries read one consistent
// view (CoordinatorCore::Read). Content (work folders' tars in the data
// store) is the RPC layer's: rpc/workdir_data_service.h moves it, blob
// first, record second; TakeOrphans hands it the blobs to delete.
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/cluster_snapshots.h"
#include "coordinator/core/coordinator_core.h"

namespace athanor::coord {

class CoreSnapshots {
 public:
  explicit CoreSnapshots(CoordinatorCore* core) : core_(core) {}

  // One tenant's ("" : every tenant's), oldest first.
  std::vector<rpc::InstanceSnapshot> List(const std::string& tenant) const;
  // ClusterSnapshots::Remove.
  absl::StatusOr<rpc::InstanceSnapshot> Remove(const std::string& tenant, const std::string& id);
  std::vector<std::string> TakeOrphans();

  // Agents (ClusterSnapshots' rules).
  absl::StatusOr<WorkdirUpload> ForStore(const std::string& node, const std::string& job_id, int32_t attempt,
                                         int32_t rank, const std::string& key) const;
  absl::StatusOr<rpc::InstanceSnapshot> WorkdirStored(const std::string& snapshot_id, int32_t rank,
                                                      int64_t size_bytes);
  absl::Status ForFetch(const std::string& node, const std::string& job_id, int32_t attempt, int32_t rank,
                        const std::string& key) const;

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
