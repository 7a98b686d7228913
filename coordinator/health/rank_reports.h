// What agents' rank reports mean for an attempt. Pure functions over the
// records; JobLifecycle (job_lifecycle.h) acts on what they say.
#pragma once

#include <string>
#include <vector>

#include "coordinator/model/types.h"

namespace athanor::coord {

// Folds one report into its rank's status. Returns false when it changes
// nothing: the rank already exited, or a running rank was already started.
// A rank that failed to start exits with 127 unless the agent gave a code.
bool ApplyRankReport(const RankReport& report, RankStatus* status);

// Where an attempt stands after its ranks' statuses changed.
struct AttemptVerdict {
  enum class Kind { kUnchanged, kAllStarted, kSucceeded, kFailed };
  Kind kind = Kind::kUnchanged;
  // kFailed: the rank to blame, the first killed by a signal, else the first
  // that exited non-zero. Points into the statuses judged.
  const RankStatus* failed = nullptr;
};
AttemptVerdict JudgeAttempt(const std::vector<RankStatus>& ranks);

// "rank R on node N exited with code C[: message]", or "... was killed by
// signal S (exit code C)...". `status.rank` indexes `allocation`.
std::string RankFailure(const std::vector<RankPlacement>& allocation, const RankStatus& status);

}  // namespace athanor::coord
