#include "coordinator/core/cluster_checkpoints.h"

#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::Status ClusterCheckpoints::ReportCheckpoint(const std::string& id, int64_t step,
                                                  int64_t commit_unix) {
  RETURN_IF_ERROR(state_.jobs_.ReportCheckpoint(id, step, commit_unix));
  if (state_.upload_holds_.Committed(id, step)) state_.ScheduleInline();
  return absl::OkStatus();
}

absl::Status ClusterCheckpoints::ReportShardUpload(const std::string& id, int32_t attempt, int64_t step,
                                                   int32_t rank, int32_t world_size, bool failed,
                                                   const std::string& error) {
  absl::StatusOr<bool> released =
      state_.upload_holds_.Report(id, attempt, step, rank, world_size, failed, error);
  if (!released.ok()) return released.status();
  if (*released) state_.ScheduleInline();
  return absl::OkStatus();
}

}  // namespace athanor::coord
