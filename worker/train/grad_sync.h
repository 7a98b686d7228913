// Bucketed gradient all-reduce that overlaps the backward pass.
//
// The flat f32 gradient buffer is cut into byte-sized buckets (a small first
// bucket, then `bucket_bytes` each). The backward pass reports how long the
// final prefix of the buffer is; every bucket inside it is launched at once
// with AllReduceAsync (one distinct tag per bucket). Finish() launches what
// is left and waits for everything; afterwards the buffer holds the sum over
// ranks. With a 16-bit wire dtype each bucket is packed into a staging buffer
// (bf16/f16), reduced there (f32 accumulation inside the collective) and
// unpacked back into the f32 buffer.
//
// Threading: one thread calls Begin/OnPrefixFinal/Finish. `comm` (not owned,
// may be null for a world of one) must outlive this object.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "collectives/communicator.h"
#include "worker/model/half.h"

namespace athanor {

struct GradSyncOptions {
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  Precision wire = Precision::kF32;  // dtype on the wire
  uint64_t tag_base = 1000;          // bucket k uses tag_base + k
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class GradSync {
 public:
  GradSync(Communicator* comm, size_t count, const GradSyncOptions& options);

  size_t num_buckets() const { return bounds_.size() - 1; }
  // Elements of bucket k: [bounds()[k], bounds()[k+1]).
  const std::vector<size_t>& bounds() const { return bounds_; }
  // Bytes handed to all-reduce per step (elements x wire dtype size).
  size_t wire_bytes() const;

  // Starts a step on `grads` (count elements, caller-owned, untouched by the
  // caller until Finish returns except for its not-yet-final tail).
  void Begin(float* grads);
  // The first `prefix` elements are final: launch every bucket inside them.
  void OnPrefixFinal(size_t prefix);
  // Launches the rest, waits for all buckets; `wait_seconds` gets the time
  // spent blocked here. Returns the first collective error.
  absl::Status Finish(double* wait_seconds);

 private:
  void Launch(size_t k);

  Communicator* const comm_;
  const size_t count_;
  const GradSyncOptions options_;
  std::vector<size_t> bounds_;
  std::vector<uint16_t> staging_;  // 16-bit wire buffer, used when wire != kF32
  float* grads_ = nullptr;
  size_t launched_ = 0;  // buckets launched this step
  std::vector<std::unique_ptr<Work>> pending_;
};

}  // namespace athanor
