// JobQueue: pending jobs by priority class (highest first), then tenant, then
// shape (what placement depends on), then submit sequence (FIFO). Fair share
// between tenants of one class is applied by the scheduling pass on top of
// this layout, since it depends on usage that changes as the pass starts
// jobs. Grouping a tenant's jobs by shape lets a pass skip every job of a
// shape at once when that shape cannot be placed any more, so a pass costs
// what it starts, not the length of the queue.
//
// It also keeps every pending job by when it last became pending, oldest
// first, so a pass finds the jobs waiting past SchedulerOptions::age_limit
// at the cost of how many there are, and by class and submit order, so the
// default policy finds each class's oldest jobs (its head) without a sort.
//
// Threading: none; confined to the owning Scheduler's caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "coordinator/scheduler/types.h"

namespace athanor::sched {

class JobQueue {
 public:
  using ShapeQueue = std::set<std::pair<uint64_t, JobId>>;   // (submit_seq, id)
  using TenantQueue = std::map<ShapeKey, ShapeQueue>;        // by shape
  using PriorityClass = std::map<std::string, TenantQueue>;  // by tenant
  using Classes = std::map<int, PriorityClass, std::greater<int>>;
  using ByWait = std::set<std::tuple<TimePoint, uint64_t, JobId>>;  // (queued_at, submit_seq, id)
  using BySubmit = std::set<std::tuple<int, uint64_t, JobId>>;      // (-priority, submit_seq, id)
  // What backfill behind a reservation depends on, over the pending jobs of
  // one shape (every class and tenant).
  struct ShapeStats {
    size_t jobs = 0;
    size_t preemptible = 0;
    std::multiset<Duration> limits;  // declared time limits > 0
  };

  // `queued_at`: when the job last became pending; Remove takes the same.
  void Add(const JobRequest& job, TimePoint queued_at);
  void Remove(const JobRequest& job, TimePoint queued_at);
  const Classes& classes() const { return classes_; }
  const ByWait& by_wait() const { return by_wait_; }
  // Every pending job, highest class first, then in submit order.
  const BySubmit& by_submit() const { return by_submit_; }
  // Null when no job of `shape` is pending.
  const ShapeStats* stats(const ShapeKey& shape) const {
    auto it = stats_.find(shape);
    return it == stats_.end() ? nullptr : &it->second;
  }
  size_t size() const { return size_; }
  // Pending jobs of `tenant`, over every class and shape.
  size_t TenantSize(const std::string& tenant) const;
  // 1-based rank among pending jobs by (priority desc, submit_seq); 0 if absent.
  int Position(const JobRequest& job) const;

 private:
  Classes classes_;
  ByWait by_wait_;
  BySubmit by_submit_;
  std::map<ShapeKey, ShapeStats> stats_;
  size_t size_ = 0;
};

}  // namespace athanor::sched
