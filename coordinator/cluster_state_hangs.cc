// ClusterState's hang and straggler operations (see hang_detector.h).
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/cluster_state.h"

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
    if (suspects_.Strike(v.node)) {
      std::string why = absl::StrCat("auto-drained: suspect in ", options_.hangs.drain_after,
                                     " hangs within ", ToSeconds(options_.hangs.drain_window),
                                     " s; last: ", v.reason);
      ATHANOR_LOG(WARNING) << "node " << v.node << " " << why;
      if (absl::Status s = DrainNode(v.node, Duration::zero(), why).status(); !s.ok()) {
        ATHANOR_LOG(ERROR) << "cannot drain " << v.node << ": " << s;
      }
    }
  }
  for (int64_t seq : jobs_.active()) {
    JobRecord* job = jobs_.Mutable(std::to_string(seq));
    if (job == nullptr || job->state != JobState::kRunning || job->stopping) continue;
    std::vector<RankFlag> flags = hangs_.Stragglers(job->id, job->attempt);
    for (const RankFlag& f : flags) {
      bool known = false;
      for (const RankFlag& old : job->stragglers) known = known || old.rank == f.rank;
      if (!known) {
        ATHANOR_LOG(WARNING) << "job " << job->id << " attempt " << job->attempt << ": rank "
                             << f.rank << " on " << f.node << " is a " << f.reason;
      }
    }
    job->stragglers = std::move(flags);
  }
}

}  // namespace athanor::coord
