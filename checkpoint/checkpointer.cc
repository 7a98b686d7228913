#include "checkpoint/checkpointer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "common/crc32c.h"
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
  RETURN_IF_ERROR(ValidateTrainingState(state));
  std::map<std::string, std::string> metadata = state.metadata;
  metadata["step"] = absl::StrCat(step);
  metadata["rank"] = absl::StrCat(options_.rank);
  metadata["world_size"] = absl::StrCat(options_.world_size);
  metadata["format"] = "athanor-v1";
  ASSIGN_OR_RETURN(SafetensorsLayout layout, PlanSafetensors(state.tensors, metadata));
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
    if (t.bytes > 0) std::memcpy(staging_.get() + layout.data_start + layout.entries[i].begin, t.data, t.bytes);
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

absl::Status Checkpointer::Upload(int64_t step, const SafetensorsLayout& layout,
                                  const std::vector<ShardSpec>& specs, RankManifest* manifest) {
  const std::string& job = options_.job;
  manifest->job = job;
  manifest->step = step;
  manifest->rank = options_.rank;
  manifest->world_size = options_.world_size;
  manifest->shard_key = ckpt_layout::ShardKey(job, step, options_.rank, options_.world_size);
  manifest->shard_size = layout.total_size;
  manifest->metadata = layout.metadata;
  ASSIGN_OR_RETURN(std::unique_ptr<WritableObject> out,
                   store_->OpenWrite(manifest->shard_key, PutMode::kOverwrite));
  const char* base = staging_.get();
  uint32_t shard_crc = crc32c::Extend(0, base, layout.data_start);
  absl::Status status = out->Append(absl::string_view(base, layout.data_start));
  const size_t chunk = std::max<size_t>(options_.upload_chunk_bytes, 4096);
  for (size_t i = 0; i < layout.entries.size() && status.ok(); ++i) {
    const SafetensorsEntry& e = layout.entries[i];
    ManifestTensor t{e.name, e.dtype, e.shape, layout.data_start + e.begin, e.end - e.begin, 0, specs[i]};
    for (uint64_t pos = 0; pos < t.bytes && status.ok(); pos += chunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, t.bytes - pos));
      const char* p = base + t.offset + pos;
      t.crc32c = crc32c::Extend(t.crc32c, p, n);
      status = out->Append(absl::string_view(p, n));
    }
    shard_crc = crc32c::Combine(shard_crc, t.crc32c, t.bytes);
    manifest->tensors.push_back(std::move(t));
  }
  if (!status.ok()) {
    out->Abort();
    return Annotate(status, absl::StrCat("uploading ", manifest->shard_key));
  }
  RETURN_IF_ERROR(Annotate(out->Close(), absl::StrCat("closing ", manifest->shard_key)));
  manifest->shard_crc32c = shard_crc;
  std::string key = ckpt_layout::ManifestKey(job, step, options_.rank);
  return Annotate(store_->Put(key, EncodeManifest(*manifest), PutMode::kOverwrite),
                  absl::StrCat("writing ", key));
}

absl::Status Checkpointer::Commit(int64_t step) {
  CommitRecord commit;
  commit.job = options_.job;
  commit.step = step;
  commit.world_size = options_.world_size;
  commit.commit_unix = clock_->UnixSeconds();
  for (int r = 0; r < options_.world_size; ++r) {
    std::string key = ckpt_layout::ManifestKey(options_.job, step, r);
    ASSIGN_OR_RETURN(std::string text, store_->Get(key, 0, -1));
    absl::StatusOr<RankManifest> m = DecodeManifest(text);
    if (!m.ok()) return Annotate(m.status(), key);
    commit.shards.push_back(CommitShard{r, m->shard_key, m->shard_size, m->shard_crc32c, key,
                                        crc32c::Value(text.data(), text.size())});
  }
  std::string key = ckpt_layout::CommitKey(options_.job, step);
  return Annotate(store_->Put(key, EncodeCommit(commit), PutMode::kCreateOnly),
                  absl::StrCat("writing ", key));
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
    RankManifest manifest;
    absl::Status status = Upload(step, staged_layout_, staged_specs_, &manifest);
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
      status = Commit(step);
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
