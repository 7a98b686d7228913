// CoreReads: the coordinator's queries (a job, the job and node lists, quotas,
// usage, why a job waits, which ranks' logs to read). Each answer comes from
// one consistent view of the state, taken under the state lock
// (CoordinatorCore::Read). The blocking commands are CoreCommands
// (core_commands.h); the agents' calls stay on CoordinatorCore.
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/core/log_targets.h"

namespace athanor::coord {

class CoreReads {
 public:
  explicit CoreReads(CoordinatorCore* core) : core_(core) {}

  // NotFound naming the id.
  absl::StatusOr<JobRecord> GetJob(const std::string& id) const;
  // Every job of `tenant` (all tenants when empty); finished ones only when
  // `include_finished`.
  std::vector<JobRecord> ListJobs(bool include_finished, const std::string& tenant) const;
  std::vector<NodeView> ListNodes() const;
  std::vector<QuotaRow> Quotas() const;
  std::vector<UsageRow> Usage(const std::string& tenant, double since_unix) const;
  absl::StatusOr<WhyResult> Why(const std::string& id) const;
  // The ranks of `attempt` (0: the current/last one) to read logs of;
  // rank < 0 for all. NotFound / InvalidArgument naming the job or rank.
  absl::StatusOr<std::vector<LogTarget>> LogTargets(const std::string& job_id, int32_t rank,
                                                    int32_t attempt) const;

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
