// CheckpointWriter: what the training loop checkpoints through, whoever
// uploads. Two implementations write the same layout, manifests and COMMIT
// (docs/architecture.md, "Who uploads"):
//  - Checkpointer (checkpointer.h): a background thread in the rank uploads
//    and rank 0 commits once every rank agrees its shard is durable (mpirun,
//    a lone process);
//  - ServiceCheckpointer (service/service_checkpointer.h): the rank copies its
//    state into the node checkpoint service's staging area and hands it off;
//    the service uploads and the coordinator commits (under an agent).
//
// Threading: one thread at a time (the training loop).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "checkpoint/training_state.h"

namespace athanor {

enum class InFlightPolicy { kWait, kSkip };

struct CheckpointStats {
  double stall_seconds = 0;   // the last Save's copy (and wait, under kWait)
  double copy_seconds = 0;    // of which the copy of the state alone (service path only)
  double upload_seconds = 0;  // the last shard + manifest upload (in-rank only)
  double total_seconds = 0;   // the last Save's start to its commit decision (in-rank only)
  double commit_seconds = 0;  // the last Save's return to its commit decision (in-rank only)
  uint64_t shard_bytes = 0;
};

class CheckpointWriter {
 public:
  virtual ~CheckpointWriter() = default;
  // true: the checkpoint is staged (in-rank) or handed off (service);
  // false: skipped under kSkip. InvalidArgument for an invalid state.
  virtual absl::StatusOr<bool> Save(int64_t step, const TrainingState& state) = 0;
  // Blocks until this rank is done with the last checkpoint (in-rank: its
  // commit decision; service: its hand-off) and returns its status.
  virtual absl::Status Wait() = 0;
  // True while the last checkpoint still holds the staging area.
  virtual bool in_flight() const = 0;
  virtual CheckpointStats stats() const = 0;
};

}  // namespace athanor
