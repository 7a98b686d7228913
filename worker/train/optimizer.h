// Optimizers over flat f32 buffers: SGD with momentum and AdamW, state in f32,
// and global gradient-norm clipping.
//
// Step() applies one update to `params` from `grads` (both `n` elements, the
// same layout the optimizer was created for). State is exposed as named flat
// buffers for checkpoints. Not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

// The learning rate each kind defaults to: one that trains athanor-train's
// default model, and one 4x wider and twice as deep, with gradient clipping at
// 1.0 (measurements at DefaultLearningRate's definition). AdamW's is PyTorch's.
inline constexpr float kAdamWDefaultLr = 1e-3f;
inline constexpr float kSgdDefaultLr = 0.02f;

struct OptimizerOptions {
  std::string kind = "adamw";  // "adamw" or "sgd"
  float lr = kAdamWDefaultLr;
  float momentum = 0.9f;      // sgd
  float beta1 = 0.9f;         // adamw
  float beta2 = 0.999f;       // adamw
  float eps = 1e-8f;          // adamw
  float weight_decay = 0.0f;  // decoupled for adamw, L2 for sgd
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void Step(float* params, const float* grads) = 0;
  // Named state buffers (each `size()` of the parameter buffer), e.g. "momentum".
  virtual std::vector<std::pair<std::string, const float*>> State() const = 0;
  // The same buffers, writable, to restore a checkpoint.
  virtual std::vector<std::pair<std::string, float*>> MutableState() = 0;
  // Number of updates applied so far (AdamW's bias correction uses it).
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
};

// InvalidArgument for an unknown kind or a non-positive lr.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           size_t n);

// kAdamWDefaultLr or kSgdDefaultLr; 0 for an unknown kind (CreateOptimizer
// names it).
float DefaultLearningRate(const std::string& kind);

// Scales `grads` (n elements) in place so that their global L2 norm is at
// most `max_norm`, as torch.nn.utils.clip_grad_norm_; returns the norm before
// clipping. The norm is summed in double in a fixed order, so equal buffers
// give bitwise-equal results (every rank of a data-parallel step clips its
// all-reduced gradients identically). A non-finite norm leaves `grads` as
// they are: an overflow is the loss scaler's to skip, not the clip's to hide.
double ClipGradNorm(float* grads, size_t n, float max_norm);

}  // namespace athanor
