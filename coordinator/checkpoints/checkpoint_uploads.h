// CheckpointUploads: the checkpoint steps whose shards node checkpoint
// services have taken over (handed off) but not yet made durable, per job, as
// the services report them (CheckpointCommit.ReportShardUpload).
//
// It answers one question for the scheduler: must a pending job wait before
// its next attempt starts? It must while a step newer than its committed one
// was handed off by every rank (a rank that did not hand it off before its
// attempt ended never will: the step cannot commit) and no rank's upload of
// that step failed, for
// at most `max_wait` since the step's first hand-off (a service that dies
// without a word must not hold the job forever). The commit of that step (or
// of a newer one), a failure report, or the bound ends the wait; the attempt
// then resumes from the newest committed step.
//
// In memory only: after a coordinator restart a requeued job does not wait
// (the services' reports of steps still uploading are not replayed).
//
// Not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "common/clock.h"

namespace athanor::coord {

class CheckpointUploads {
 public:
  explicit CheckpointUploads(Duration max_wait) : max_wait_(max_wait) {}
  Duration max_wait() const { return max_wait_; }

  // A rank of `attempt` handed off its shard of `step`. A report of an older
  // attempt than the one recorded for the step is ignored; a newer attempt
  // starts the step over.
  void HandedOff(const std::string& job, int32_t attempt, int64_t step, int32_t rank,
                 int32_t world_size, TimePoint now);
  // A rank's upload of `step` failed (or was discarded): the step cannot
  // commit, and waiting for it ends.
  void Failed(const std::string& job, int32_t attempt, int64_t step);

  struct Wait {
    int64_t step = 0;
    TimePoint until{};   // when waiting gives up
    int32_t ranks = 0;   // ranks that handed it off (all of them)
  };
  // The newest step a restart of `job` must wait for, given its committed
  // step; steps at or below it are forgotten.
  std::optional<Wait> MustWait(const std::string& job, int64_t committed_step, TimePoint now);
  // The newest step MustWait stopped waiting for because `max_wait` passed
  // (once per such step; for the log).
  std::optional<int64_t> TakeGaveUp(const std::string& job);
  // `step` committed: steps up to it are forgotten (a running job keeps only
  // the few it has in flight).
  void Committed(const std::string& job, int64_t step);
  void Forget(const std::string& job) { jobs_.erase(job); }
  // Jobs with a step on record.
  std::set<std::string> Jobs() const;

 private:
  struct Step {
    int32_t attempt = 0;
    int32_t world_size = 0;
    TimePoint first{};
    std::set<int32_t> ranks;
    bool failed = false;
    bool gave_up = false;
  };
  struct Job {
    std::map<int64_t, Step> steps;
    std::optional<int64_t> gave_up;  // not yet taken
  };
  const Duration max_wait_;
  std::map<std::string, Job> jobs_;
};

}  // namespace athanor::coord
