#include "coordinator/scheduler/scheduler_state.h"

namespace athanor::sched {

int SchedulerState::TenantQuota(const std::string& tenant) const {
  auto it = quotas.find(tenant);
  return it == quotas.end() ? -1 : it->second;
}

const std::string& SchedulerState::HoldOf(const QueuedJob& job) const {
  if (!job.hold.empty()) return job.hold;
  auto it = tenant_holds.find(job.req.tenant);
  return it == tenant_holds.end() ? job.hold : it->second;
}

double SchedulerState::TenantShare(const std::string& tenant) const {
  auto it = shares.find(tenant);
  return it == shares.end() ? 1.0 : it->second;
}

const QueuedJob* SchedulerState::Find(const JobId& id) const {
  auto it = jobs.find(id);
  return it == jobs.end() ? nullptr : &it->second;
}

void SchedulerState::IndexEnd(QueuedJob& job, bool hold) {
  if (job.indexed_end) ends.erase({*job.indexed_end, &job});
  job.indexed_end = hold ? job.EndEstimate() : std::nullopt;
  if (job.indexed_end) ends.emplace(*job.indexed_end, &job);
}

}  // namespace athanor::sched
