// Injectable time. Code that makes decisions on time (heartbeat timeouts,
// grace periods, backoff) takes a Clock*, so tests drive it with FakeClock.
#pragma once

#include <chrono>
#include <cstdint>
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

using Duration = std::chrono::nanoseconds;
// Time since an arbitrary epoch; only differences are meaningful except for
// WallClock values, which are Unix time.
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time. Thread-safe.
  virtual TimePoint Now() const = 0;
  // Unix time in seconds, for records shown to people. Thread-safe.
  virtual int64_t UnixSeconds() const = 0;
  // Unix time in milliseconds (WallClock's base, so that Unix times read
  // off the monotonic clock are not up to a second behind). Thread-safe.
  virtual int64_t UnixMillis() const { return UnixSeconds() * 1000; }
};

// The real clock: steady_clock and system_clock.
class RealClock final : public Clock {
 public:
  TimePoint Now() const override;
  int64_t UnixSeconds() const override;
  int64_t UnixMillis() const override;
  static RealClock* Get();  // process-wide instance, never destroyed
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t unix_seconds = 1'700'000'000) : unix_base_(unix_seconds) {}
  TimePoint Now() const override;
  int64_t UnixSeconds() const override;
  int64_t UnixMillis() const override;
  void Advance(Duration d);

 private:
  mutable absl::Mutex mu_;
  Duration elapsed_ ABSL_GUARDED_BY(mu_){0};
  const int64_t unix_base_;
};

inline double ToSeconds(Duration d) { return std::chrono::duration<double>(d).count(); }
inline Duration Seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}
inline Duration Millis(int64_t ms) { return std::chrono::milliseconds(ms); }

}  // namespace athanor
