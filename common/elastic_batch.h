// The global batch of an elastic job, kept at every size it may run at.
//
// A step trains on world x micro-batch x accumulation samples. An elastic job
// fixes the product (its global batch); when its world changes, the
// accumulation adapts and the micro-batch changes only where it must. The
// samples of step t are the same at any factorisation (worker/data's
// text_dataset.h), so a run that changes size trains on what it would have.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

struct BatchShape {
  int micro_batch = 0;  // samples per micro-batch per rank
  int accum = 0;        // micro-batches per step
};

// The shape that makes `global` samples a step on `world` ranks with
// micro-batches of at most `max_micro`: the fewest micro-batches whose
// size divides this rank's share exactly. InvalidArgument when `global` is
// not a multiple of `world`, or any argument is under 1.
absl::StatusOr<BatchShape> FitGlobalBatch(int64_t global, int world, int max_micro);

// Of the node counts min..max, those at which `global` samples cannot be
// split evenly over node count x ranks_per_node ranks (empty: every size
// keeps the batch).
std::vector<int> SizesBreakingGlobalBatch(int64_t global, int min_nodes, int max_nodes, int ranks_per_node);

}  // namespace athanor
