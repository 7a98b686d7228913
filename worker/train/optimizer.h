// Optimizers over flat f32 buffers: SGD with momentum and AdamW, state in f32.
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

struct OptimizerOptions {
  std::string kind = "sgd";  // "sgd" or "adamw"
  float lr = 0.1f;
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

}  // namespace athanor
