// SplitMix64: a tiny, fast, seedable generator whose whole state is one
// uint64 (easy to checkpoint). Not thread-safe; one owner.
#pragma once

#include <cstdint>

namespace athanor {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float NextSymmetric() { return static_cast<float>(Next() >> 40) / 8388608.0f - 1.0f; }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// A stateless hash of three words (for per-(seed, step, index) sampling).
inline uint64_t Hash3(uint64_t a, uint64_t b, uint64_t c) {
  SplitMix64 r(a * 0x9e3779b97f4a7c15ULL ^ b);
  r = SplitMix64(r.Next() ^ c);
  return r.Next();
}

}  // namespace athanor
