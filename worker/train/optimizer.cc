#include "worker/train/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace athanor {
namespace {

// v = momentum * v + (g + wd * w); w -= lr * v  (PyTorch's SGD, dampening 0).
class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, size_t n) : o_(o), velocity_(n, 0.0f) {}
  void Step(float* params, const float* grads) override {
    for (size_t i = 0; i < velocity_.size(); ++i) {
      const float g = grads[i] + o_.weight_decay * params[i];
      velocity_[i] = o_.momentum * velocity_[i] + g;
      params[i] -= o_.lr * velocity_[i];
    }
    ++steps_;
  }
  std::vector<std::pair<std::string, const float*>> State() const override {
    return {{"momentum", velocity_.data()}};
  }
  std::vector<std::pair<std::string, float*>> MutableState() override {
    return {{"momentum", velocity_.data()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  const OptimizerOptions o_;
  std::vector<float> velocity_;
  int64_t steps_ = 0;
};

// AdamW (Loshchilov & Hutter) with bias correction, as torch.optim.AdamW.
class AdamW final : public Optimizer {
 public:
  AdamW(const OptimizerOptions& o, size_t n) : o_(o), m_(n, 0.0f), v_(n, 0.0f) {}
  void Step(float* params, const float* grads) override {
    ++steps_;
    const double c1 = 1.0 - std::pow(static_cast<double>(o_.beta1), steps_);
    const double c2 = 1.0 - std::pow(static_cast<double>(o_.beta2), steps_);
    const float step_size = static_cast<float>(o_.lr / c1);
    const float inv_sqrt_c2 = static_cast<float>(1.0 / std::sqrt(c2));
    const float decay = 1.0f - o_.lr * o_.weight_decay;
    for (size_t i = 0; i < m_.size(); ++i) {
      const float g = grads[i];
      m_[i] = o_.beta1 * m_[i] + (1.0f - o_.beta1) * g;
      v_[i] = o_.beta2 * v_[i] + (1.0f - o_.beta2) * g * g;
      params[i] *= decay;
      params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) * inv_sqrt_c2 + o_.eps);
    }
  }
  std::vector<std::pair<std::string, const float*>> State() const override {
    return {{"exp_avg", m_.data()}, {"exp_avg_sq", v_.data()}};
  }
  std::vector<std::pair<std::string, float*>> MutableState() override {
    return {{"exp_avg", m_.data()}, {"exp_avg_sq", v_.data()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  const OptimizerOptions o_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           size_t n) {
  if (!(options.lr > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be > 0, got ", options.lr));
  }
  if (options.kind == "sgd") return std::unique_ptr<Optimizer>(new Sgd(options, n));
  if (options.kind == "adamw") return std::unique_ptr<Optimizer>(new AdamW(options, n));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", options.kind, "' (expected sgd or adamw)"));
}

}  // namespace athanor
