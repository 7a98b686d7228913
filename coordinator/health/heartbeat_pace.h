// HeartbeatPace: how often agents heartbeat, and how long a silent node has
// before it is DOWN, as the fleet grows.
//
// Each agent long-polls once per interval, so a fleet of N nodes sends about
// N heartbeats a second at a 1 s interval, and a coordinator that cannot
// answer that many queues them (docs/benchmarks.md, "Coordinator at fleet
// scale"). With a rate set (--max-heartbeats-per-s), the interval stretches
// to N / rate once the fleet is large enough, and the DOWN timeout stretches
// in proportion, so the same number of missed heartbeats marks a node DOWN.
// Desired-state changes are not slowed: a change wakes a parked long-poll at
// once, whatever the interval. The interval is told to agents at
// registration and in every heartbeat answer.
//
// Thread-safe: the node count is an atomic that the state's owner sets and
// the agent service reads without a lock.
#pragma once

#include <algorithm>
#include <atomic>

#include "common/clock.h"

namespace athanor::coord {

class HeartbeatPace {
 public:
  // `max_per_s` <= 0: a fixed interval and timeout.
  HeartbeatPace(Duration base_interval, Duration base_timeout, double max_per_s)
      : base_interval_(base_interval), base_timeout_(base_timeout), max_per_s_(max_per_s) {}

  // Nodes registered (DOWN ones included: they come back and heartbeat).
  void SetNodes(int n) { nodes_.store(std::max(n, 0), std::memory_order_relaxed); }
  int nodes() const { return nodes_.load(std::memory_order_relaxed); }

  // max(the base interval, nodes / max_per_s), in whole milliseconds.
  Duration Interval() const {
    if (max_per_s_ <= 0) return base_interval_;
    const auto spread = std::chrono::milliseconds(static_cast<int64_t>(1000.0 * nodes() / max_per_s_));
    return std::max<Duration>(base_interval_, spread);
  }
  // The base timeout, scaled as the interval is.
  Duration Timeout() const {
    const Duration interval = Interval();
    if (interval == base_interval_) return base_timeout_;
    return std::chrono::duration_cast<Duration>(base_timeout_ * (ToSeconds(interval) / ToSeconds(base_interval_)));
  }

 private:
  const Duration base_interval_;
  const Duration base_timeout_;
  const double max_per_s_;
  std::atomic<int> nodes_{0};
};

}  // namespace athanor::coord
