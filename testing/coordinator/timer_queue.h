// Runs callbacks at given times on one thread of its own.
//
// Thread-safe. Callbacks run without the queue's lock held, one at a time, in
// deadline order; Stop() (also run by the destructor) drops what has not run
// yet and returns once no callback is running.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor::bench {

class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;

  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `fn` at `when` (at once if past). Dropped after Stop().
  void Schedule(Clock::time_point when, std::function<void()> fn);
  void Stop();

 private:
  struct Entry {
    Clock::time_point when;
    uint64_t seq;  // keeps equal deadlines in scheduling order
    std::function<void()> fn;
    bool operator>(const Entry& o) const {
      return when != o.when ? when > o.when : seq > o.seq;
    }
  };
  void Loop();

  absl::Mutex mu_;
  std::vector<Entry> heap_ ABSL_GUARDED_BY(mu_);  // a min-heap on (when, seq)
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace athanor::bench
