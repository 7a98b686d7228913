#include "coordinator/scheduler/accounting.h"

#include <chrono>

namespace athanor::sched {

int64_t Accounting::JobUsage::OpenGpuUs(TimePoint now) const {
  if (!open || now <= started) return 0;
  return std::chrono::duration_cast<std::chrono::microseconds>(now - started).count() * gpus;
}

void Accounting::Start(const JobId& job, const std::string& tenant, int gpus, TimePoint now) {
  JobUsage& usage = jobs_[job];
  if (usage.open) Stop(job, now);
  usage.tenant = tenant;
  usage.open = true;
  usage.gpus = gpus;
  usage.started = now;
  tenants_[tenant].gpus_in_use += gpus;
}

void Accounting::Stop(const JobId& job, TimePoint now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.open) return;
  JobUsage& usage = it->second;
  int64_t used = usage.OpenGpuUs(now);
  usage.gpu_us += used;
  usage.open = false;
  TenantUsage& tenant = tenants_[usage.tenant];
  tenant.gpu_us += used;
  tenant.gpus_in_use -= usage.gpus;
  usage.gpus = 0;
}

void Accounting::Forget(const JobId& job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end() && !it->second.open) jobs_.erase(it);
}

int Accounting::GpusInUse(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.gpus_in_use;
}

double Accounting::JobGpuSeconds(const JobId& job, TimePoint now) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  return static_cast<double>(it->second.gpu_us + it->second.OpenGpuUs(now)) / 1e6;
}

double Accounting::TenantGpuSeconds(const std::string& tenant, TimePoint now) const {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return 0;
  int64_t total = it->second.gpu_us;
  for (const auto& [id, usage] : jobs_) {
    if (usage.tenant == tenant) total += usage.OpenGpuUs(now);
  }
  return static_cast<double>(total) / 1e6;
}

std::vector<UsageEntry> Accounting::Usage(TimePoint now) const {
  std::map<std::string, std::map<JobId, const JobUsage*>> by_tenant;
  for (const auto& [id, usage] : jobs_) by_tenant[usage.tenant][id] = &usage;
  std::vector<UsageEntry> rows;
  for (const auto& [tenant, totals] : tenants_) {
    rows.push_back(UsageEntry{tenant, "", TenantGpuSeconds(tenant, now), totals.gpus_in_use});
    for (const auto& [id, usage] : by_tenant[tenant]) {
      rows.push_back(UsageEntry{tenant, id,
                              static_cast<double>(usage->gpu_us + usage->OpenGpuUs(now)) / 1e6,
                              usage->gpus});
    }
  }
  return rows;
}

}  // namespace athanor::sched
