#include "coordinator/scheduler/job_queue.h"

namespace athanor::sched {

void JobQueue::Add(const JobRequest& job) {
  if (classes_[job.priority][job.tenant].emplace(job.submit_seq, job.id).second) ++size_;
}

void JobQueue::Remove(const JobRequest& job) {
  auto cls = classes_.find(job.priority);
  if (cls == classes_.end()) return;
  auto tenant = cls->second.find(job.tenant);
  if (tenant == cls->second.end()) return;
  if (tenant->second.erase({job.submit_seq, job.id}) > 0) --size_;
  if (tenant->second.empty()) cls->second.erase(tenant);
  if (cls->second.empty()) classes_.erase(cls);
}

int JobQueue::Position(const JobRequest& job) const {
  int ahead = 0;
  for (const auto& [priority, tenants] : classes_) {
    if (priority < job.priority) break;
    for (const auto& [tenant, queue] : tenants) {
      if (priority > job.priority) {
        ahead += static_cast<int>(queue.size());
        continue;
      }
      for (const auto& [seq, id] : queue) {
        if (seq >= job.submit_seq) break;
        ++ahead;
      }
    }
  }
  const auto cls = classes_.find(job.priority);
  if (cls == classes_.end()) return 0;
  const auto tenant = cls->second.find(job.tenant);
  if (tenant == cls->second.end() || !tenant->second.count({job.submit_seq, job.id})) return 0;
  return ahead + 1;
}

}  // namespace athanor::sched
