// Trainer: one rank's training loop for MlpLm with data parallelism.
//
// A step trains on the global batch of `world * micro_batch * accum`
// samples; this rank runs `accum` micro-batches of its contiguous share.
// The first accum-1 micro-batches accumulate gradients locally with no
// communication; during the backward pass of the last one, gradient buckets
// are all-reduced as soon as they are final (unless overlap is off, then all
// buckets go after backward). The loss is the mean over the global batch, so
// gradients are consistent across factorisations. f32 master weights and
// optimizer state; with bf16/fp16 the forward/backward use a rounded compute
// copy and gradients travel in the compute dtype. fp16 uses a LossScaler whose
// skip decision is all-reduced (max of a found-inf flag) so all ranks agree.
// Gradient-norm clipping acts on the all-reduced, unscaled (mean) gradient,
// which is bitwise the same on every rank, so every rank clips identically;
// a step the scaler skips is not clipped. Clipping holds no state, so resumed
// runs stay bitwise identical.
//
// Threading: single-threaded (one caller); `data` and `comm` are not owned,
// must outlive the Trainer; comm may be null for a world of one.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "worker/data/text_dataset.h"
#include "worker/model/mlp_lm.h"
#include "worker/train/grad_sync.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/optimizer.h"

namespace athanor {

struct TrainerOptions {
  ModelConfig model;
  Precision precision = Precision::kF32;
  std::string device = "cpu";  // matrix products: "cpu" (OpenBLAS) or "cuda" (cuBLAS)
  OptimizerOptions optimizer;
  float clip_grad_norm = 1.0f;  // max L2 norm of the mean gradient; 0: no clipping
  int micro_batch = 8;
  int accum = 1;
  uint64_t seed = 1;
  size_t bucket_bytes = 25u << 20;
  size_t first_bucket_bytes = 1u << 20;
  bool overlap = true;
  int64_t inject_overflow_step = -1;  // fp16 test hook: this step's grads overflow...
  int inject_overflow_rank = 0;       // ...on this rank only
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct StepStats {
  int64_t step = 0;
  double loss = 0.0;          // mean over the global batch, before the update
  double tokens_per_s = 0.0;  // global predicted tokens / step time
  float loss_scale = 1.0f;    // the scale used for this step
  bool skipped = false;       // fp16 overflow: no update applied
  double grad_norm = 0.0;     // L2 norm of the mean gradient before clipping (0: not computed)
  bool stop = false;          // some rank asked to stop: every rank ends after this step
  double comm_wait_ms = 0.0;  // blocked waiting on gradient all-reduce
  double step_ms = 0.0;
  size_t grad_bytes = 0;  // bytes handed to all-reduce for gradients
};

class Trainer {
 public:
  // InvalidArgument for bad sizes or options.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainerOptions& options,
                                                         const TextDataset* data,
                                                         Communicator* comm);

  // Runs the next step (starting at 0). `stop_requested` is this rank's vote
  // to stop after this step (e.g. SIGTERM seen); StepStats::stop is true on
  // every rank when any rank voted, so all ranks stop after the same step.
  absl::StatusOr<StepStats> Step(bool stop_requested = false);

  int64_t step() const { return step_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  const MlpLm& model() const { return model_; }
  const std::vector<float>& params() const { return params_; }

  // Everything needed to resume: parameters ("param.<name>"), optimizer
  // state ("<state>.<name>") as views, plus metadata (step = data cursor,
  // seed, loss scale, ...).
  std::vector<NamedTensor> StateTensors() const;
  std::map<std::string, std::string> StateMetadata() const;
  // Restores what StateTensors/StateMetadata exported (names without views:
  // name -> values). InvalidArgument naming the first missing or mis-sized
  // tensor, or a metadata field that does not parse or does not match
  // (seed, optimizer, precision). The world size may differ: data-parallel
  // replicas hold the same state. After an error the optimizer state may be
  // partly overwritten: discard this Trainer.
  absl::Status LoadState(const std::map<std::string, std::vector<float>>& tensors,
                         const std::map<std::string, std::string>& metadata);

 private:
  Trainer(const TrainerOptions& options, const TextDataset* data, Communicator* comm,
          std::unique_ptr<MatMul> matmul, std::unique_ptr<Optimizer> optimizer);
  absl::Status AllReduceScalars(float* values, size_t n, ReduceOp op, uint64_t tag);

  const TrainerOptions options_;
  const TextDataset* const data_;
  Communicator* const comm_;
  const int rank_;
  const int world_;
  std::unique_ptr<MatMul> matmul_;  // used by model_
  MlpLm model_;
  std::unique_ptr<Optimizer> optimizer_;
  LossScaler scaler_;
  GradSync sync_;
  std::vector<float> params_;   // f32 master weights
  std::vector<float> compute_;  // rounded copy (bf16/fp16 only)
  std::vector<float> grads_;
  std::vector<uint8_t> contexts_, targets_;
  int64_t step_ = 0;
};

}  // namespace athanor
