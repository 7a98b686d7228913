// CoreCommands: the coordinator's blocking commands (cancel and preempt a
// job, drain and undrain a node, set a quota). Each runs on the state under
// the state lock and returns once what it changed is durable
// (CoordinatorCore::Write). The queries are CoreReads (core_reads.h); the
// agents' calls and submissions, which answer asynchronously, stay on
// CoordinatorCore.
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator_core.h"

namespace athanor::coord {

class CoreCommands {
 public:
  explicit CoreCommands(CoordinatorCore* core) : core_(core) {}

  // ClusterState::CancelJob.
  absl::StatusOr<JobRecord> CancelJob(const std::string& id);
  // JobLifecycle::NoteActivity ("shell", "keep", ...).
  absl::StatusOr<JobRecord> NoteActivity(const std::string& id, const std::string& signal,
                                         const std::string& detail);
  // JobLifecycle::Preempt: by hand, with `grace` (0: the job's own).
  absl::StatusOr<JobRecord> PreemptJob(const std::string& id, Duration grace);
  // ClusterAdmin's (cluster_admin.h); SetQuota answers every quota after it.
  absl::StatusOr<NodeView> DrainNode(const std::string& name, Duration grace, const std::string& reason);
  absl::StatusOr<NodeView> UndrainNode(const std::string& name);
  absl::StatusOr<std::vector<QuotaRow>> SetQuota(const std::string& tenant, int32_t gpus);

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
