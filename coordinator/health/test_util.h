// What the health room's tests and core's hang tests build rank reports with.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/model/types.h"

namespace athanor::coord::testing {

// A report of a running rank at `step`, having finished collective `seq` and,
// when `waiting` is not 0, blocked in all-reduce number `waiting`; 100 ms a
// step, 80 of them computing.
inline RankReport ProgressReport(const std::string& job, int32_t attempt, int32_t rank, int64_t step,
                                 uint64_t seq, uint64_t waiting = 0, bool stopped = false) {
  RankReport r;
  r.job_id = job;
  r.attempt = attempt;
  r.rank = rank;
  r.progress.seen = true;
  r.progress.step = step;
  r.progress.collective_seq = seq;
  r.progress.waiting_seq = waiting;
  r.progress.waiting_op = waiting ? "all-reduce" : "";
  r.progress.stopped = stopped;
  r.progress.step_ms = 100;
  r.progress.step_compute_ms = 80;
  return r;
}

}  // namespace athanor::coord::testing
