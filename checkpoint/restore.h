// Restore: loads the newest valid committed checkpoint of a job into a rank's
// tensors, resharding when the world size changed.
//
// Candidates are the committed steps, newest first. For each, the COMMIT and
// every rank manifest are read, every shard's size is checked with Head, and
// the bytes this rank needs are fetched with ranged gets and checked against
// the manifest's CRC32C (whole-shard CRC when a whole shard is read). Any
// missing or corrupt object rejects the step with a warning naming the object,
// and the previous committed step is tried.
//
// Resharding (N writers -> M readers): a target tensor asks for rows
// [dim0_offset, dim0_offset + shape[0]) of its dim-0 extent (all rows when
// replicated); they are assembled, by name, from a replicated copy (rank
// r % N's shard) or from the sharded pieces of all N shards.
//
// With `agreement` set, ranks vote on each candidate (CommitBarrier) so all of
// them settle on the same step; every rank must call Restore. Blocks on the
// store. Targets are owned by the caller and written in place; after an
// error (or a rejected step) their contents are unspecified.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/commit_barrier.h"
#include "checkpoint/manifest.h"
#include "checkpoint/object_store.h"
#include "checkpoint/training_state.h"

namespace athanor {

struct RestoreOptions {
  std::string job;
  int rank = 0;
  int world_size = 1;
  CommitBarrier* agreement = nullptr;  // not owned; may be null (one process)
  bool verify_all_shards = false;      // also CRC every shard this rank does not read
};

struct RestoreResult {
  int64_t step = 0;
  int source_world_size = 0;
  std::map<std::string, std::string> metadata;  // from shard rank % source_world_size
  uint64_t bytes_read = 0;
  std::vector<std::string> rejected;            // "step N: object: reason", newest first
};

// NotFound when no committed step validates; InvalidArgument when a target
// does not match the checkpoint (unknown name, dtype or shape mismatch).
absl::StatusOr<RestoreResult> Restore(ObjectStore* store, const RestoreOptions& options,
                                      const std::vector<TensorRef>& targets);

// Checks one committed step completely (every shard's size and CRC32C, every
// manifest). OK or DataLoss/NotFound naming the first bad object.
absl::Status VerifyStep(ObjectStore* store, const std::string& job, int64_t step);

}  // namespace athanor
