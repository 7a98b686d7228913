// Checkpointer: asynchronous checkpoints for one rank, without an agent.
//
// Save(step, state) copies every tensor into a reused host staging buffer laid
// out as the final safetensors file, and returns: that copy is the whole
// training stall. A background thread then streams the shard to the store,
// writes the rank manifest, and asks the CommitBarrier whether every rank's
// shard is durable; if so, rank 0 writes COMMIT (create-only) and, after
// reporting the commit, applies retention. At most one checkpoint is in
// flight: a Save while one is in flight waits for it (kWait) or is skipped
// (kSkip).
//
// Threading: Save/Wait/accessors may be called from any one thread at a time
// (the training loop); the upload thread is internal. Does not own the store
// or the barrier; both must outlive the Checkpointer. The destructor waits
// for the in-flight checkpoint.
//
// Errors: Save fails only for an invalid state (InvalidArgument). Upload,
// barrier and commit errors are logged once and reported by Wait() and
// last_status(); the step then does not exist (no COMMIT).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/commit_barrier.h"
#include "checkpoint/manifest.h"
#include "checkpoint/object_store.h"
#include "checkpoint/retention.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/training_state.h"
#include "common/clock.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

struct CheckpointerOptions {
  std::string job;
  int rank = 0;
  int world_size = 1;
  InFlightPolicy in_flight = InFlightPolicy::kWait;
  RetentionOptions retention;              // applied by rank 0 after each commit
  // Granularity of CRC + Append(): small enough that the bytes the CRC just
  // read are still in cache when write() copies them.
  size_t upload_chunk_bytes = 1 << 20;
  Clock* clock = nullptr;                  // commit timestamps; null: RealClock
};

class Checkpointer final : public CheckpointWriter {
 public:
  Checkpointer(ObjectStore* store, CommitBarrier* barrier, CheckpointerOptions options);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // true: the checkpoint is staged and in flight; false: skipped (kSkip).
  absl::StatusOr<bool> Save(int64_t step, const TrainingState& state) override;
  // Blocks until nothing is in flight and rank 0's retention pass is done;
  // the status of the last checkpoint.
  absl::Status Wait() override;
  absl::Status last_status() const;
  // True while a checkpoint is staged and not yet decided (upload or commit
  // pending). Lets callers agree on skipping across ranks before Save.
  bool in_flight() const override;
  // The newest step this rank saw agreed durable (and, on rank 0, committed).
  std::optional<int64_t> last_committed_step() const;
  CheckpointStats stats() const override;

 private:
  void UploadLoop();

  ObjectStore* const store_;
  CommitBarrier* const barrier_;
  const CheckpointerOptions options_;
  Clock* const clock_;

  // Staging: written by Save only while !in_flight_, read by the upload
  // thread only while in_flight_; the flag hands ownership over.
  std::unique_ptr<char[]> staging_;
  size_t staging_capacity_ = 0;
  SafetensorsLayout staged_layout_;
  std::vector<ShardSpec> staged_specs_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool housekeeping_ ABSL_GUARDED_BY(mu_) = false;  // retention running
  TimePoint staged_done_ ABSL_GUARDED_BY(mu_);  // when Save returned
  int64_t staged_step_ ABSL_GUARDED_BY(mu_) = 0;
  TimePoint staged_at_ ABSL_GUARDED_BY(mu_);
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> last_committed_ ABSL_GUARDED_BY(mu_);
  CheckpointStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace athanor
