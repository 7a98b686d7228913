// athanor-train's straggler test hook (--inject-slow RANK:FROM:TO:FACTOR):
// on rank RANK, steps FROM <= step < TO take FACTOR x their compute time (the
// extra is slept before the step and counted as compute on the progress page),
// standing for a slow GPU or a noisy neighbour. Value type and pure parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace athanor {

struct SlowPlan {
  int rank = -1;  // -1: off
  int64_t from = 0;
  int64_t to = 0;
  double factor = 1;
  bool Applies(int r, int64_t step) const { return r == rank && step >= from && step < to; }
};

inline absl::StatusOr<SlowPlan> ParseSlowPlan(const std::string& spec) {
  SlowPlan p;
  if (spec.empty()) return p;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &p.rank) ||
      !absl::SimpleAtoi(parts[1], &p.from) || !absl::SimpleAtoi(parts[2], &p.to) ||
      !absl::SimpleAtod(parts[3], &p.factor) || p.rank < 0 || p.from < 0 || p.to < p.from ||
      !(p.factor >= 1 && p.factor <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inject-slow expects RANK:FROM:TO:FACTOR (rank >= 0, 0 <= FROM <= TO, 1 <= FACTOR "
        "<= 100), not '", spec, "'"));
  }
  return p;
}

}  // namespace athanor
