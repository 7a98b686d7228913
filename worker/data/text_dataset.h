// Training data: the bytes of a text file (or a synthetic text), sampled so
// that the global batch of step t is a fixed set of samples determined by
// (seed, t) alone.
//
// Sample i of step t starts at Hash(seed, t, i) mod (size - context); its
// input is `context` bytes and its target is the byte after them. Ranks and
// micro-batches take contiguous index ranges of the global batch, so every
// factorisation world x micro-batch x accumulation trains on the same
// samples, and a run resumed at step t sees the batches it would have seen.
// Immutable after Load; thread-safe to read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

class TextDataset {
 public:
  // `source` is a file path or "synthetic:BYTES" (a deterministic pseudo-text
  // of that many bytes). NotFound / InvalidArgument when unusable, including
  // text shorter than context + 2 bytes.
  static absl::StatusOr<TextDataset> Load(const std::string& source, int context);
  static TextDataset FromString(std::string text, int context);

  size_t size() const { return text_.size(); }
  int context() const { return context_; }

  // Writes samples [first, first + count) of step `step`: count*context input
  // bytes and count target bytes.
  void Fill(uint64_t seed, int64_t step, int64_t first, int count, uint8_t* contexts,
            uint8_t* targets) const;

 private:
  TextDataset(std::string text, int context) : text_(std::move(text)), context_(context) {}
  std::string text_;
  int context_;
};

// A deterministic English-like text of `bytes` bytes (words from a small
// vocabulary with a Markov flavour), for benchmarks and tests without files.
std::string SyntheticText(size_t bytes);

}  // namespace athanor
