// Dynamic loss scaling for fp16, with torch.cuda.amp.GradScaler's defaults:
// initial scale 2^16, doubled after 2000 consecutive clean steps, halved
// (and the step skipped) when a gradient is inf or NaN. Disabled scalers
// keep scale 1 and never skip. Not thread-safe; one owner.
#pragma once

#include <cstdint>

namespace athanor {

class LossScaler {
 public:
  explicit LossScaler(bool enabled, float initial = 65536.0f, int growth_interval = 2000)
      : enabled_(enabled), scale_(enabled ? initial : 1.0f), growth_interval_(growth_interval) {}

  bool enabled() const { return enabled_; }
  float scale() const { return scale_; }

  // Records the outcome of a step whose (all-reduced) gradients did or did
  // not contain inf/NaN; returns true when the optimizer step must be skipped.
  bool Update(bool found_inf) {
    if (!enabled_) return false;
    if (found_inf) {
      scale_ *= 0.5f;
      clean_steps_ = 0;
      return true;
    }
    if (++clean_steps_ == growth_interval_) {
      scale_ *= 2.0f;
      clean_steps_ = 0;
    }
    return false;
  }
  int clean_steps() const { return clean_steps_; }
  // Restores a checkpointed state.
  void Restore(float scale, int clean_steps) {
    if (enabled_) scale_ = scale;
    clean_steps_ = clean_steps;
  }

 private:
  const bool enabled_;
  float scale_;
  const int growth_interval_;
  int clean_steps_ = 0;
};

}  // namespace athanor
