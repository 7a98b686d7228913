// Accounting: GPUs in use and GPU-seconds per tenant and per job, from the
// start and stop events of attempts, timed by the caller's (injected) clock.
//
// GPU time is kept as integer GPU-microseconds so that totals stay exact
// through any number of evictions, requeues and re-admissions. A job's GPUs
// count against its tenant from Start until Stop, PREEMPTING included: that is
// what quotas limit.
//
// Threading: none; confined to the owning Scheduler's caller.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/scheduler/types.h"

namespace athanor::sched {

struct UsageEntry {
  std::string tenant;
  JobId job;               // empty on a tenant's total
  double gpu_seconds = 0;  // finished attempts plus the running one up to `now`
  int gpus_in_use = 0;
};

class Accounting {
 public:
  // Opens an attempt of `job` holding `gpus`; a job has at most one open.
  void Start(const JobId& job, const std::string& tenant, int gpus, TimePoint now);
  // Closes the open attempt (no-op if none).
  void Stop(const JobId& job, TimePoint now);
  // Drops a finished job's per-job row (its tenant total stays).
  void Forget(const JobId& job);

  int GpusInUse(const std::string& tenant) const;
  double JobGpuSeconds(const JobId& job, TimePoint now) const;
  double TenantGpuSeconds(const std::string& tenant, TimePoint now) const;
  // Tenant totals, each followed by its jobs, sorted by name.
  std::vector<UsageEntry> Usage(TimePoint now) const;

 private:
  struct JobUsage {
    std::string tenant;
    int64_t gpu_us = 0;  // closed attempts
    bool open = false;
    int gpus = 0;
    TimePoint started{};
    int64_t OpenGpuUs(TimePoint now) const;
  };
  struct TenantUsage {
    int64_t gpu_us = 0;  // closed attempts
    int gpus_in_use = 0;
  };

  std::unordered_map<JobId, JobUsage> jobs_;
  std::map<std::string, TenantUsage> tenants_;
};

}  // namespace athanor::sched
