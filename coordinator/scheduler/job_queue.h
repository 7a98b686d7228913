// JobQueue: pending jobs by priority class (highest first), then tenant, then
// shape (what placement depends on), then submit sequence (FIFO). Fair share
// between tenants of one class is applied by the scheduling pass on top of
// this layout, since it depends on usage that changes as the pass starts
// jobs. Grouping a tenant's jobs by shape lets a pass skip every job of a
// shape at once when that shape cannot be placed any more, so a pass costs
// what it starts, not the length of the queue.
//
// Threading: none; confined to the owning Scheduler's caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "coordinator/scheduler/types.h"

namespace athanor::sched {

class JobQueue {
 public:
  using ShapeQueue = std::set<std::pair<uint64_t, JobId>>;   // (submit_seq, id)
  using TenantQueue = std::map<ShapeKey, ShapeQueue>;        // by shape
  using PriorityClass = std::map<std::string, TenantQueue>;  // by tenant
  using Classes = std::map<int, PriorityClass, std::greater<int>>;

  void Add(const JobRequest& job);
  void Remove(const JobRequest& job);
  const Classes& classes() const { return classes_; }
  size_t size() const { return size_; }
  // Pending jobs of `tenant`, over every class and shape.
  size_t TenantSize(const std::string& tenant) const;
  // 1-based rank among pending jobs by (priority desc, submit_seq); 0 if absent.
  int Position(const JobRequest& job) const;

 private:
  Classes classes_;
  size_t size_ = 0;
};

}  // namespace athanor::sched
