// UploadHolds: pending jobs held back in the scheduler while a checkpoint
// of theirs is still uploading, so that the next attempt resumes from it
// rather than from an older one. CheckpointUploads (checkpoint_uploads.h)
// says whether a job must wait; this class turns that into scheduler holds
// (shown by `athanor why`) and releases them.
//
// Not thread-safe: confined to ClusterState's owner. The scheduler and the
// clock are not owned and outlive it; `find_job` reads the job records
// (JobLifecycle's, in the core) and returns null for an unknown id.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/checkpoints/checkpoint_uploads.h"
#include "coordinator/model/types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::coord {

class UploadHolds {
 public:
  using FindJob = std::function<const JobRecord*(const std::string& id)>;
  UploadHolds(Duration max_wait, sched::Scheduler* sched, FindJob find_job, const WallClock* clock)
      : uploads_(max_wait), sched_(sched), find_job_(std::move(find_job)), clock_(clock) {}

  // `step` of job `id` committed. True when the job is held: a pass may
  // start it now.
  bool Committed(const std::string& id, int64_t step);
  // A node checkpoint service took over (or failed) rank `rank`'s shard of
  // `step`. NotFound for an unknown job. True when a held job may start now.
  absl::StatusOr<bool> Report(const std::string& id, int32_t attempt, int64_t step, int32_t rank,
                              int32_t world_size, bool failed, const std::string& error);
  // Holds the pending jobs that must wait, releases those that need not any
  // more; before every pass. `other`: the jobs that must wait for other
  // reasons (job id -> why: volume stores owed, core/cluster_volumes.h),
  // held here too, since a job has one hold in the scheduler.
  void Refresh(const std::map<std::string, std::string>& other = {});

 private:
  CheckpointUploads uploads_;
  sched::Scheduler* const sched_;
  const FindJob find_job_;
  const WallClock* const clock_;
  std::set<std::string> held_;  // jobs held in the scheduler
};

}  // namespace athanor::coord
