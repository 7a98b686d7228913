// SimRandom: the simulator's one source of randomness. Uniforms come from the
// raw 64-bit output of std::mt19937_64, which the standard fixes, and the
// distributions are computed here rather than by <random>'s (whose algorithms
// vary by library), so a seed gives the same workload and failures anywhere.
//
// Not thread-safe; one per generator.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace athanor::sim {

class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) : engine_(seed) {}

  // In [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller; the second value is dropped for simplicity).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]: log is finite
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }
  // In [0, n); n > 0.
  uint64_t Below(uint64_t n) { return engine_() % n; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace athanor::sim
