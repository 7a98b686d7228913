#include "coordinator/scheduler/job_queue.h"

namespace athanor::sched {

void JobQueue::Add(const JobRequest& job, TimePoint queued_at) {
  if (classes_[job.priority][job.tenant][ShapeOf(job)].emplace(job.submit_seq, job.id).second) {
    ++size_;
    by_wait_.emplace(queued_at, job.submit_seq, job.id);
    by_submit_.emplace(-job.priority, job.submit_seq, job.id);
    ShapeStats& stats = stats_[ShapeOf(job)];
    ++stats.jobs;
    stats.preemptible += job.preemptible;
    if (job.time_limit > Duration::zero()) stats.limits.insert(job.time_limit);
  }
}

void JobQueue::Remove(const JobRequest& job, TimePoint queued_at) {
  by_wait_.erase({queued_at, job.submit_seq, job.id});
  by_submit_.erase({-job.priority, job.submit_seq, job.id});
  auto cls = classes_.find(job.priority);
  if (cls == classes_.end()) return;
  auto tenant = cls->second.find(job.tenant);
  if (tenant == cls->second.end()) return;
  auto shape = tenant->second.find(ShapeOf(job));
  if (shape == tenant->second.end()) return;
  if (shape->second.erase({job.submit_seq, job.id}) > 0) {
    --size_;
    // Added with the same request: a pending job's request does not change.
    ShapeStats& stats = stats_.at(shape->first);
    stats.preemptible -= job.preemptible;
    if (auto limit = stats.limits.find(job.time_limit); limit != stats.limits.end()) stats.limits.erase(limit);
    if (--stats.jobs == 0) stats_.erase(shape->first);
  }
  if (shape->second.empty()) tenant->second.erase(shape);
  if (tenant->second.empty()) cls->second.erase(tenant);
  if (cls->second.empty()) classes_.erase(cls);
}

size_t JobQueue::TenantSize(const std::string& tenant) const {
  size_t n = 0;
  for (const auto& [priority, tenants] : classes_) {
    auto it = tenants.find(tenant);
    if (it == tenants.end()) continue;
    for (const auto& [shape, queue] : it->second) n += queue.size();
  }
  return n;
}

int JobQueue::Position(const JobRequest& job) const {
  int ahead = 0;
  bool found = false;
  for (const auto& [priority, tenants] : classes_) {
    if (priority < job.priority) break;
    for (const auto& [tenant, shapes] : tenants) {
      for (const auto& [shape, queue] : shapes) {
        if (priority > job.priority) {
          ahead += static_cast<int>(queue.size());
          continue;
        }
        for (const auto& [seq, id] : queue) {
          if (seq >= job.submit_seq) {
            found = found || (seq == job.submit_seq && id == job.id);
            break;
          }
          ++ahead;
        }
      }
    }
  }
  return found ? ahead + 1 : 0;
}

}  // namespace athanor::sched
