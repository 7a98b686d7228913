#include "testing/coordinator/timer_queue.h"

#include <algorithm>

#include "absl/time/time.h"

namespace athanor::bench {

TimerQueue::TimerQueue() : thread_([this] { Loop(); }) {}

TimerQueue::~TimerQueue() { Stop(); }

void TimerQueue::Schedule(Clock::time_point when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stop_) return;
  heap_.push_back({when, next_seq_++, std::move(fn)});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
}

void TimerQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    heap_.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void TimerQueue::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (heap_.empty()) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !heap_.empty(); };
      mu_.Await(absl::Condition(&ready));
      continue;
    }
    const Clock::time_point first = heap_.front().when;
    const uint64_t first_seq = heap_.front().seq;
    if (first > Clock::now()) {
      // Wakes at the deadline, or earlier when an earlier entry arrives.
      auto changed = [this, first_seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || heap_.front().seq != first_seq;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), absl::FromChrono(first - Clock::now()));
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    std::function<void()> fn = std::move(heap_.back().fn);
    heap_.pop_back();
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

}  // namespace athanor::bench
