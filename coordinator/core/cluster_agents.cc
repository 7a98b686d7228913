#include "coordinator/core/cluster_agents.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/health/report_placement.h"

namespace athanor::coord {

absl::Status ClusterAgents::Register(const NodeRecord& node, const std::vector<RankReport>& reported) {
  const std::vector<RankReport> ranks = PlacedOn(node.name, reported);
  RETURN_IF_ERROR(state_.nodes_.Register(node, ranks));
  state_.jobs_.ApplyReports(ranks);
  // Ranks that ran here but that the agent no longer knows are lost.
  for (int64_t seq : std::set<int64_t>(state_.jobs_.active())) {
    JobRecord* job = state_.jobs_.Mutable(std::to_string(seq));
    if (job == nullptr || job->stopping) continue;
    for (const RankPlacement& p : job->allocation) {
      const RankStatus& st = job->ranks[p.rank];
      if (p.node != node.name || !st.started || st.exited) continue;
      if (!state_.nodes_.Runs(node.name, {job->id, job->attempt, p.rank})) {
        state_.jobs_.FailAttempt(job, absl::StrCat("rank ", p.rank, " on node ", node.name,
                                                   " was lost (its agent restarted)"));
        break;
      }
    }
  }
  state_.volumes().NodeLost(node.name, "its agent registered again");  // a restarted agent's copies are gone
  state_.ScheduleInline();
  return absl::OkStatus();
}

bool ClusterAgents::Heartbeat(const std::string& node, uint64_t known_generation,
                              const std::vector<RankReport>& reported, bool health_ok,
                              const std::string& health_message) {
  const uint64_t marks = state_.log_.mark_count();
  const std::vector<RankReport> ranks = PlacedOn(node, reported);
  NodeTable::Beat beat = state_.nodes_.Heartbeat(node, known_generation, ranks, health_ok);
  if (beat == NodeTable::Beat::kUnregistered) return false;
  if (beat == NodeTable::Beat::kHealthFailed) {
    std::string msg = health_message.size() > 512 ? health_message.substr(0, 512) : health_message;
    ATHANOR_LOG(WARNING) << "node " << node << " failed its health check: " << msg;
    // The node exists (it just heartbeated): draining it cannot fail.
    if (absl::Status s = state_.admin()
                             .DrainNode(node, Duration::zero(), absl::StrCat("health check failed: ", msg))
                             .status();
        !s.ok()) {
      ATHANOR_LOG(ERROR) << s;
    }
  }
  state_.jobs_.ApplyReports(ranks);
  state_.ObserveProgress(node, ranks);
  state_.jobs_.SettleAll();
  // A heartbeat that changed nothing cannot let a job start: deferred
  // scheduling skips it (at 10,000 nodes most heartbeats are such).
  if (state_.options_.schedule_inline || state_.log_.mark_count() != marks) state_.ScheduleInline();
  return true;
}

std::vector<RankReport> ClusterAgents::PlacedOn(const std::string& node,
                                                const std::vector<RankReport>& reports) const {
  return PlacedReports(node, reports, [this](const std::string& id) { return state_.jobs_.Find(id); });
}

std::vector<DesiredRank> ClusterAgents::DesiredFor(const ClusterState& state, const std::string& node) {
  std::vector<DesiredRank> out;
  for (const std::string& id : state.nodes_.JobsOn(node)) {
    const JobRecord* job = state.jobs_.Find(id);
    if (job == nullptr || !job->allocated) continue;
    const size_t first = out.size();
    state.launcher_.AppendDesired(*job, node, &out);
    for (size_t i = first; i < out.size(); ++i) ClusterSnapshots::Annotate(state, *job, &out[i]);
  }
  return out;
}

}  // namespace athanor::coord
