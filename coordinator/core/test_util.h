// Helpers shared by the core's tests: an agent's report of a desired rank.
#pragma once

#include "coordinator/model/types.h"

namespace athanor::coord {

// What an agent reports of desired rank `d`: running, or exited (exit code
// and signal as given).
inline RankReport ReportOf(const DesiredRank& d, RankPhase phase = RankPhase::kRunning,
                           int32_t exit_code = 0, int32_t signal = 0) {
  RankReport r;
  r.job_id = d.job_id;
  r.attempt = d.attempt;
  r.rank = d.rank;
  r.phase = phase;
  r.exit_code = exit_code;
  r.signal = signal;
  return r;
}

}  // namespace athanor::coord
