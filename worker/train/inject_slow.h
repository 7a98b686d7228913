// athanor-train's straggler test hook (--inject-slow RANK:FROM:TO:FACTOR[:ATTEMPT]):
// on rank RANK, steps FROM <= step < TO take FACTOR x their compute time (the
// extra is slept before the step and counted as compute on the progress page),
// standing for a slow GPU or a noisy neighbour. With ATTEMPT (>= 1) only in
// that attempt ($ATHANOR_ATTEMPT; 0 without a coordinator counts as 1), as a
// node that is slow until the job moves off it. Value type and pure parsing.
#pragma once

#include <algorithm>
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
  int attempt = 0;  // 0: every attempt
  bool Applies(int r, int64_t step, int current_attempt) const {
    const bool this_attempt = attempt == 0 || std::max(current_attempt, 1) == attempt;
    return r == rank && step >= from && step < to && this_attempt;
  }
};

inline absl::StatusOr<SlowPlan> ParseSlowPlan(const std::string& spec) {
  SlowPlan p;
  if (spec.empty()) return p;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if ((parts.size() != 4 && parts.size() != 5) || !absl::SimpleAtoi(parts[0], &p.rank) ||
      !absl::SimpleAtoi(parts[1], &p.from) || !absl::SimpleAtoi(parts[2], &p.to) ||
      !absl::SimpleAtod(parts[3], &p.factor) || p.rank < 0 || p.from < 0 || p.to < p.from ||
      !(p.factor >= 1 && p.factor <= 100) ||
      (parts.size() == 5 && (!absl::SimpleAtoi(parts[4], &p.attempt) || p.attempt < 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inject-slow expects RANK:FROM:TO:FACTOR[:ATTEMPT] (rank >= 0, 0 <= FROM <= TO, 1 <= "
        "FACTOR <= 100, ATTEMPT >= 1), not '", spec, "'"));
  }
  return p;
}

}  // namespace athanor
