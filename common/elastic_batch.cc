#include "common/elastic_batch.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace athanor {

absl::StatusOr<BatchShape> FitGlobalBatch(int64_t global, int world, int max_micro) {
  if (global < 1 || world < 1 || max_micro < 1) {
    return absl::InvalidArgumentError(absl::StrCat("global batch ", global, ", world ", world,
                                                   ", micro-batch ", max_micro, ": each must be at least 1"));
  }
  if (global % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the global batch of ", global, " samples cannot be split over ",
                                                   world, " ranks (not a multiple)"));
  }
  const int64_t share = global / world;
  // share is a multiple of itself, so the search ends by accum == share.
  for (int64_t accum = (share + max_micro - 1) / max_micro; accum <= share; ++accum) {
    if (share % accum == 0) {
      if (accum > INT32_MAX) break;
      return BatchShape{static_cast<int>(share / accum), static_cast<int>(accum)};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("the global batch of ", global, " samples over ", world,
                                                 " ranks needs more than 2^31 micro-batches"));
}

std::vector<int> SizesBreakingGlobalBatch(int64_t global, int min_nodes, int max_nodes, int ranks_per_node) {
  std::vector<int> out;
  for (int n = std::max(min_nodes, 1); n <= max_nodes; ++n) {
    if (global % (int64_t{n} * std::max(ranks_per_node, 1)) != 0) out.push_back(n);
  }
  return out;
}

}  // namespace athanor
