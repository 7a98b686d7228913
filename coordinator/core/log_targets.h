// Where the logs of a job's ranks live: which node ran each rank of an
// attempt, and that node's agent address (for GetLogs). Pure; reads the state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

struct LogTarget {
  int32_t attempt = 0;
  int32_t rank = 0;
  std::string node;
  std::string agent_address;  // empty when the node is unknown
};

// The ranks of `attempt` (0: the current/last one) of `job_id`; rank < 0 for
// all. NotFound / FailedPrecondition / InvalidArgument naming the job, attempt
// or rank.
absl::StatusOr<std::vector<LogTarget>> FindLogTargets(const ClusterState& state,
                                                      const std::string& job_id, int32_t rank,
                                                      int32_t attempt);

}  // namespace athanor::coord
