// WallClock: Unix time read off the injected monotonic Clock, so that a
// FakeClock drives both the state machine's timeouts and the Unix times it
// records. Value type; thread-compatible. The Clock is not owned.
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace athanor::coord {

class WallClock {
 public:
  explicit WallClock(const Clock* clock)
      : clock_(clock), mono_base_(clock->Now()), unix_base_ms_(clock->UnixMillis()) {}

  TimePoint Now() const { return clock_->Now(); }
  int64_t UnixSeconds() const { return clock_->UnixSeconds(); }
  // Unix seconds now, fractional.
  double UnixNow() const { return ToUnix(clock_->Now()); }
  double ToUnix(TimePoint t) const {
    return static_cast<double>(unix_base_ms_) / 1000.0 + ToSeconds(t - mono_base_);
  }
  TimePoint FromUnix(double unix) const { return clock_->Now() - Seconds(UnixNow() - unix); }

 private:
  const Clock* clock_;
  TimePoint mono_base_;
  int64_t unix_base_ms_;
};

}  // namespace athanor::coord
