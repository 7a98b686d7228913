#include "checkpoint/checkpointer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/shard_upload.h"
#include "checkpoint/stream_copy.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {

Checkpointer::Checkpointer(ObjectStore* store, CommitBarrier* barrier, CheckpointerOptions options)
    : store_(store),
      barrier_(barrier),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : RealClock::Get()) {
  thread_ = std::thread([this] { UploadLoop(); });
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock lock(&mu_);
    while (!(!in_flight_ && !housekeeping_)) cv_.Wait(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

bool Checkpointer::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

absl::StatusOr<bool> Checkpointer::Save(int64_t step, const TrainingState& state) {
  TimePoint start = clock_->Now();
  ASSIGN_OR_RETURN(SafetensorsLayout layout,
                   PlanShard(state, step, options_.rank, options_.world_size));
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_ && options_.in_flight == InFlightPolicy::kSkip) return false;
    while (in_flight_) cv_.Wait(&mu_);
  }
  // The upload thread is idle: the staging buffer is ours.
  if (staging_capacity_ < layout.total_size) {
    staging_.reset(new char[layout.total_size]);
    staging_capacity_ = layout.total_size;
  }
  std::memcpy(staging_.get(), layout.header.data(), layout.header.size());
  staged_specs_.clear();
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const TensorRef& t = state.tensors[i];
    if (t.bytes > 0) StreamCopy(staging_.get() + layout.data_start + layout.entries[i].begin, t.data, t.bytes);
    staged_specs_.push_back(t.shard);
  }
  staged_layout_ = std::move(layout);
  absl::MutexLock lock(&mu_);
  stats_.stall_seconds = ToSeconds(clock_->Now() - start);
  staged_step_ = step;
  staged_at_ = start;
  staged_done_ = clock_->Now();
  in_flight_ = true;
  cv_.SignalAll();
  return true;
}

void Checkpointer::UploadLoop() {
  while (true) {
    int64_t step;
    TimePoint staged_at;
    {
      absl::MutexLock lock(&mu_);
      while (!(in_flight_ || stopping_)) cv_.Wait(&mu_);
      if (!in_flight_) return;
      step = staged_step_;
      staged_at = staged_at_;
    }
    TimePoint upload_start = clock_->Now();
    RankManifest manifest = PlanManifest(options_.job, step, options_.rank, options_.world_size,
                                         staged_layout_, staged_specs_);
    absl::Status status =
        UploadStagedShard(store_, staging_.get(), options_.upload_chunk_bytes, &manifest);
    double upload_seconds = ToSeconds(clock_->Now() - upload_start);
    if (!status.ok()) {
      ATHANOR_LOG(ERROR) << "checkpoint step " << step << " rank " << options_.rank
                         << " upload to " << store_->Describe() << " failed: " << status.ToString();
    }
    absl::StatusOr<bool> all = barrier_->AllDurable(step, status.ok());
    if (status.ok() && !all.ok()) {
      status = Annotate(all.status(), "commit barrier");
      ATHANOR_LOG(ERROR) << "checkpoint step " << step << ": " << status.ToString();
    } else if (status.ok() && !*all) {
      status = absl::AbortedError(absl::StrCat("checkpoint step ", step,
                                               ": another rank's shard is not durable"));
      ATHANOR_LOG(WARNING) << status.message();
    }
    if (status.ok() && options_.rank == 0) {
      status = WriteCommit(store_, options_.job, step, options_.world_size, clock_->UnixSeconds());
      if (!status.ok()) ATHANOR_LOG(ERROR) << "commit of step " << step << " failed: " << status.ToString();
    }
    {
      absl::MutexLock lock(&mu_);
      last_status_ = status;
      if (status.ok()) last_committed_ = step;
      stats_.upload_seconds = upload_seconds;
      stats_.total_seconds = ToSeconds(clock_->Now() - staged_at);
      stats_.commit_seconds = ToSeconds(clock_->Now() - staged_done_);
      housekeeping_ = status.ok() && options_.rank == 0;
      stats_.shard_bytes = staged_layout_.total_size;
      in_flight_ = false;
      cv_.SignalAll();
    }
    // Housekeeping after the commit is durable and reported; it never touches
    // the staging buffer, so the next Save may already be copying.
    if (status.ok() && options_.rank == 0) {
      absl::StatusOr<RetentionReport> kept = ApplyRetention(store_, options_.job, options_.retention);
      if (!kept.ok()) {
        ATHANOR_LOG(WARNING) << "retention for " << options_.job << " failed: " << kept.status().ToString();
      }
      absl::MutexLock lock(&mu_);
      housekeeping_ = false;
      cv_.SignalAll();
    }
  }
}

absl::Status Checkpointer::Wait() {
  absl::MutexLock lock(&mu_);
  while (!(!in_flight_ && !housekeeping_)) cv_.Wait(&mu_);
  return last_status_;
}

absl::Status Checkpointer::last_status() const {
  absl::MutexLock lock(&mu_);
  return last_status_;
}

std::optional<int64_t> Checkpointer::last_committed_step() const {
  absl::MutexLock lock(&mu_);
  return last_committed_;
}

CheckpointStats Checkpointer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace athanor
