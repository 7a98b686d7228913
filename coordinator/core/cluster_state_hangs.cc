// ClusterState's hang and straggler operations (see hang_detector.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

void ClusterState::ObserveProgress(const std::string& node, const std::vector<RankReport>& ranks) {
  for (const RankReport& r : ranks) {
    if (r.phase != RankPhase::kRunning) continue;
    const JobRecord* job = jobs_.Find(r.job_id);
    if (job == nullptr || job->attempt != r.attempt || job->state != JobState::kRunning ||
        job->stopping) {
      continue;
    }
    hangs_.Observe(node, r);
  }
}

void ClusterState::CheckHangs() {
  std::vector<const JobRecord*> running;
  for (int64_t seq : jobs_.active()) {
    const JobRecord* job = jobs_.Find(std::to_string(seq));
    if (job != nullptr && job->state == JobState::kRunning && !job->stopping) running.push_back(job);
  }
  for (const HangVerdict& v : hangs_.Check(running)) {
    JobRecord* job = jobs_.Mutable(v.job_id);
    if (job == nullptr) continue;
    ATHANOR_LOG(WARNING) << "job " << job->id << " attempt " << v.attempt << ": " << v.reason;
    job->hang = {v.attempt, v.suspect, v.node, v.reason, clock_.UnixSeconds(), v.stalled_s};
    job->stragglers.clear();
    jobs_.FailAttempt(job, v.reason);  // agents capture stacks before the kill (AppendDesired)
    // A hang the job caused itself says nothing about the node; others count
    // once per tenant, so no tenant alone drains a node (SuspectLedger).
    if (!CountsAgainstNode(v.cause)) continue;
    if (suspects_.Strike(v.node, job->spec.tenant)) {
      std::string why = absl::StrCat("auto-drained: suspect in hangs of ", options_.hangs.drain_after,
                                     " tenants' jobs within ", ToSeconds(options_.hangs.drain_window),
                                     " s; last: ", v.reason);
      ATHANOR_LOG(WARNING) << "node " << v.node << " " << why;
      if (absl::Status s = admin().DrainNode(v.node, Duration::zero(), why).status(); !s.ok()) {
        ATHANOR_LOG(ERROR) << "cannot drain " << v.node << ": " << s;
      }
    }
  }
  std::vector<std::pair<std::string, RankFlag>> moves;  // stopped after the walk over active jobs
  for (int64_t seq : jobs_.active()) {
    JobRecord* job = jobs_.Mutable(std::to_string(seq));
    if (job == nullptr || job->state != JobState::kRunning || job->stopping) continue;
    std::vector<RankFlag> flags = hangs_.Stragglers(job->id, job->attempt);
    const RankFlag* move_off = nullptr;
    for (const RankFlag& f : flags) {
      bool known = false;
      for (const RankFlag& old : job->stragglers) known = known || old.rank == f.rank;
      if (!known) {
        ATHANOR_LOG(WARNING) << "job " << job->id << " attempt " << job->attempt << ": rank "
                             << f.rank << " on " << f.node << " is a " << f.reason;
        if (job->spec.move_off_stragglers && move_off == nullptr) move_off = &f;
      }
    }
    if (move_off != nullptr) moves.emplace_back(job->id, *move_off);
    job->stragglers = std::move(flags);
  }
  for (const auto& [id, flag] : moves) {
    if (JobRecord* job = jobs_.Mutable(id); job != nullptr) MoveOffStraggler(job, flag);
  }
}

void ClusterState::MoveOffStraggler(JobRecord* job, const RankFlag& flag) {
  std::vector<std::string> avoid = job->avoid_nodes;
  if (std::find(avoid.begin(), avoid.end(), flag.node) == avoid.end()) avoid.push_back(flag.node);
  // Only where the job could run without those nodes: a gang that cannot be
  // placed elsewhere stays where it is (slow beats waiting forever).
  sched::JobRequest req = ToSchedRequest(*job, options_);
  req.avoid_nodes = avoid;
  const int hosts = sched::CountUpAndStaticallyFit(sched_.view().membership(), req);
  if (hosts < req.least_nodes()) {
    ATHANOR_LOG(WARNING) << "job " << job->id << " stays on " << flag.node << ": without "
                         << absl::StrJoin(avoid, ", ") << " only " << hosts << " node(s) could host it, "
                         << req.least_nodes() << " needed";
    return;
  }
  if (absl::Status s = sched_.SetAvoidNodes(job->id, avoid); !s.ok()) {
    ATHANOR_LOG(ERROR) << "scheduler: job " << job->id << " avoid " << flag.node << ": " << s;
    return;
  }
  job->avoid_nodes = std::move(avoid);
  jobs_.BeginPreempt(job, GraceOf(*job, options_), PreemptCause::kStraggler,
                     absl::StrCat("moving off a straggler: rank ", flag.rank, " on ", flag.node, " (",
                                  flag.reason, ")"));
}

}  // namespace athanor::coord
