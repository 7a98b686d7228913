#include "coordinator/core/log_targets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace athanor::coord {

absl::StatusOr<std::vector<LogTarget>> FindLogTargets(const ClusterState& state,
                                                      const std::string& job_id, int32_t rank,
                                                      int32_t attempt) {
  const JobRecord* job = state.jobs().Find(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", job_id.substr(0, 64), "'"));
  if (job->attempt == 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job->id, " has not started yet"));
  }
  if (attempt < 0 || attempt > job->attempt) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: ", attempt, " is not an attempt of job ",
                                                   job->id, " (attempts so far: ", job->attempt, ")"));
  }
  if (attempt == 0) attempt = job->attempt;
  // An elastic job's attempts differ in size: each one's own nodes count.
  int32_t world = job->spec.nodes * job->spec.gpus_per_node;
  if (attempt == job->attempt && !job->allocation.empty()) {
    world = static_cast<int32_t>(job->allocation.size());
  } else if (static_cast<size_t>(attempt) <= job->attempt_nodes.size() && !job->attempt_nodes[attempt - 1].empty()) {
    world = static_cast<int32_t>(job->attempt_nodes[attempt - 1].size()) * job->spec.gpus_per_node;
  }
  if (rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", rank, " is not a rank of job ", job->id, " (world size ", world, ")"));
  }
  // Ranks are laid out node-major: rank r ran on the attempt's node
  // r / gpus_per_node.
  std::vector<std::string> nodes_by_rank(world);
  if (attempt == job->attempt) {
    for (const RankPlacement& p : job->allocation) nodes_by_rank[p.rank] = p.node;
  } else if (static_cast<size_t>(attempt) <= job->attempt_nodes.size() &&
             !job->attempt_nodes[attempt - 1].empty()) {
    const std::vector<std::string>& nodes = job->attempt_nodes[attempt - 1];
    for (int32_t r = 0; r < world; ++r) {
      nodes_by_rank[r] = nodes[std::min<size_t>(r / job->spec.gpus_per_node, nodes.size() - 1)];
    }
  } else {
    return absl::NotFoundError(absl::StrCat("attempt ", attempt, " of job ", job->id,
                                            " ran before placements were recorded"));
  }
  std::vector<LogTarget> out;
  for (int32_t r = 0; r < world; ++r) {
    if (rank >= 0 && r != rank) continue;
    LogTarget t{attempt, r, nodes_by_rank[r], ""};
    if (std::optional<NodeRecord> n = state.nodes().Get(t.node)) t.agent_address = n->agent_address;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace athanor::coord
