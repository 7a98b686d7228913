#include "common/clock.h"

namespace athanor {

TimePoint RealClock::Now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

int64_t RealClock::UnixSeconds() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t RealClock::UnixMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

RealClock* RealClock::Get() {
  static RealClock* clock = new RealClock();
  return clock;
}

TimePoint FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return TimePoint(elapsed_);
}

int64_t FakeClock::UnixSeconds() const {
  absl::MutexLock lock(&mu_);
  return unix_base_ + std::chrono::duration_cast<std::chrono::seconds>(elapsed_).count();
}

int64_t FakeClock::UnixMillis() const {
  absl::MutexLock lock(&mu_);
  return unix_base_ * 1000 + std::chrono::duration_cast<std::chrono::milliseconds>(elapsed_).count();
}

void FakeClock::Advance(Duration d) {
  absl::MutexLock lock(&mu_);
  elapsed_ += d;
}

}  // namespace athanor
