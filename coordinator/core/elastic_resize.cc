#include "coordinator/core/elastic_resize.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace athanor::coord {
namespace {

std::set<std::string> AttemptNodes(const JobRecord& job) {
  std::set<std::string> nodes;
  for (const RankPlacement& p : job.allocation) nodes.insert(p.node);
  return nodes;
}

}  // namespace

bool ShrinksWithout(const JobRecord& job, const std::string& node, const NodeTable& nodes) {
  if (!job.spec.elastic()) return false;
  std::set<std::string> left = AttemptNodes(job);
  left.erase(node);
  for (auto it = left.begin(); it != left.end();) it = nodes.IsDown(*it) ? left.erase(it) : std::next(it);
  return static_cast<int>(left.size()) >= job.spec.min_nodes;
}

bool FailureBecomesShrink(const JobRecord& job, const std::string& node, const NodeTable& nodes) {
  if (!job.stopping || job.preempted || job.stop_outcome == JobState::kCancelled) return false;
  const bool own = std::any_of(job.allocation.begin(), job.allocation.end(),
                               [&](const RankPlacement& p) { return p.node == node; });
  return own && ShrinksWithout(job, node, nodes);
}

std::optional<std::string> GrowthAtCheckpoint(const JobRecord& job, const sched::Scheduler& sched) {
  if (!job.spec.elastic() || job.stopping || job.state != JobState::kRunning) return std::nullopt;
  const int more = sched.GrowableNodes(job.id);
  if (more <= 0) return std::nullopt;
  const size_t now = AttemptNodes(job).size();
  return absl::StrCat("grown at checkpoint step ", job.committed_step, ": ", more, " more node(s) free (", now,
                      " -> ", now + static_cast<size_t>(more), " of at most ", job.spec.nodes, ")");
}

int64_t StepsPastCheckpoint(const JobRecord& job) {
  const TelemetryFigures& t = job.last_telemetry;
  if (t.attempt != job.attempt || t.step < 0) return 0;
  // A checkpoint of step S resumes at step S: steps S..t.step run again (all
  // of them when none was committed).
  return std::max<int64_t>(0, t.step - std::max<int64_t>(job.committed_step, 0) + 1);
}

}  // namespace athanor::coord
