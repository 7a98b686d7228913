// ClusterCheckpoints: checkpoints on the cluster state. A facet of
// ClusterState (ClusterState::checkpoints()), like ClusterAdmin: a job's
// newest committed step, and the uploads of its shards by the nodes'
// checkpoint services, which a requeued job's next attempt may wait for
// (UploadHolds, checkpoints/upload_holds.h). A report that releases a held
// job lets the scheduler run.
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace athanor::coord {

class ClusterState;

class ClusterCheckpoints {
 public:
  explicit ClusterCheckpoints(ClusterState& state) : state_(state) {}

  // The newest committed step (JobLifecycle::ReportCheckpoint); a job
  // waiting for that step to upload may start now.
  absl::Status ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix);
  // A node checkpoint service took over (`failed` false) or failed to upload
  // (`failed` true) rank `rank`'s shard of `step`. While a step newer than
  // the committed one is in flight, the job's next attempt waits for it
  // (checkpoint_uploads.h). NotFound for an unknown job.
  absl::Status ReportShardUpload(const std::string& id, int32_t attempt, int64_t step, int32_t rank,
                                 int32_t world_size, bool failed, const std::string& error);

 private:
  ClusterState& state_;
};

}  // namespace athanor::coord
