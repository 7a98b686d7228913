#include "worker/train/grad_sync.h"

#include <algorithm>
#include <chrono>

namespace athanor {

GradSync::GradSync(Communicator* comm, size_t count, const GradSyncOptions& options)
    : comm_(comm), count_(count), options_(options) {
  const size_t elem = options_.wire == Precision::kF32 ? 4 : 2;
  const size_t first =
      std::max<size_t>(1, std::min(options_.first_bucket_bytes, options_.bucket_bytes) / elem);
  const size_t rest = std::max<size_t>(1, options_.bucket_bytes / elem);
  bounds_.push_back(0);
  size_t at = 0;
  while (at < count_) {
    at = std::min(count_, at + (bounds_.size() == 1 ? first : rest));
    bounds_.push_back(at);
  }
  if (bounds_.size() == 1) bounds_.push_back(0);
  if (options_.wire != Precision::kF32) staging_.resize(count_);
}

size_t GradSync::wire_bytes() const { return count_ * (options_.wire == Precision::kF32 ? 4 : 2); }

void GradSync::Begin(float* grads) {
  grads_ = grads;
  launched_ = 0;
  pending_.clear();
}

void GradSync::Launch(size_t k) {
  const size_t begin = bounds_[k], n = bounds_[k + 1] - begin;
  if (comm_ == nullptr || comm_->world_size() == 1) {
    // No peers: only the wire rounding remains, so results match any world size.
    if (options_.wire != Precision::kF32) {
      PackHalf(options_.wire, grads_ + begin, staging_.data() + begin, n);
    }
    pending_.push_back(nullptr);
    return;
  }
  CollectiveOptions opts;
  opts.tag = options_.tag_base + k;
  opts.timeout = options_.timeout;
  if (options_.wire == Precision::kF32) {
    pending_.push_back(comm_->AllReduceAsync(grads_ + begin, grads_ + begin, n, DataType::kF32,
                                             ReduceOp::kSum, opts));
  } else {
    uint16_t* s = staging_.data() + begin;
    PackHalf(options_.wire, grads_ + begin, s, n);
    const DataType t = options_.wire == Precision::kBF16 ? DataType::kBF16 : DataType::kF16;
    pending_.push_back(comm_->AllReduceAsync(s, s, n, t, ReduceOp::kSum, opts));
  }
}

void GradSync::OnPrefixFinal(size_t prefix) {
  while (launched_ < num_buckets() && bounds_[launched_ + 1] <= prefix) Launch(launched_++);
  // Backends without a progress thread (ucx) advance only inside calls:
  // poke the pending work so it moves while the backward pass goes on.
  for (const std::unique_ptr<Work>& w : pending_) {
    if (w != nullptr) w->Done();
  }
}

absl::Status GradSync::Finish(double* wait_seconds) {
  while (launched_ < num_buckets()) Launch(launched_++);
  const auto start = std::chrono::steady_clock::now();
  absl::Status first_error;
  for (size_t k = 0; k < pending_.size(); ++k) {
    if (pending_[k] != nullptr) {
      absl::Status s = pending_[k]->Wait(options_.timeout);
      if (!s.ok() && first_error.ok()) first_error = s;
    }
  }
  *wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!first_error.ok()) return first_error;
  if (options_.wire != Precision::kF32) {
    UnpackHalf(options_.wire, staging_.data(), grads_, count_);
  }
  pending_.clear();
  return absl::OkStatus();
}

}  // namespace athanor
