// TenantAccounts: what tenants may hold and what they used. GPU quotas (from
// --quota, overridden by `athanor quota set`, which persists), GPU-time usage
// per tenant and job, and idle reclaim of interactive allocations (use seen
// in agents' CPU or GPU figures; a warning, then a reclaim).
//
// Not thread-safe: confined to ClusterState's owner. Options, scheduler, log
// and clock are not owned and outlive it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::coord {

class TenantAccounts {
 public:
  TenantAccounts(const StateOptions* options, sched::Scheduler* sched, ChangeLog* log,
                 const WallClock* clock);

  // Quotas from the store (they override --quota); < 0: removed.
  void RestoreQuotas(const std::map<std::string, int32_t>& stored);
  absl::Status SetQuota(const std::string& tenant, int32_t gpus);  // < 0: remove
  std::vector<QuotaRow> Quotas() const;
  // Per tenant (total row first, then its jobs), GPU time after `since_unix`.
  std::vector<UsageRow> Usage(const std::map<int64_t, JobRecord>& jobs, const std::string& tenant,
                              double since_unix) const;

  // A running rank's report of an interactive job: real use keeps it alive.
  void TrackUse(JobRecord* job, const RankReport& report);
  // Warns an interactive job idle past its timeout; returns the reason to
  // stop it with once the reclaim grace has passed too.
  std::optional<std::string> CheckIdle(JobRecord* job);
  // The job's attempt ended: its samples go.
  void Forget(int64_t seq);
  // Use seen now (`signal`: "cpu", "gpu", "shell", "keep", ...; `detail` says
  // what, for `athanor job`): the idle clock starts over and a warning goes.
  void MarkActive(JobRecord* job, double now_unix, std::string signal, std::string detail = "");

 private:

  const StateOptions* const options_;
  sched::Scheduler* const sched_;
  ChangeLog* const log_;
  const WallClock* const clock_;
  std::map<std::string, int32_t> quotas_;
  // Interactive jobs: per rank, the last CPU sample (cpu seconds, Unix time).
  std::map<std::pair<int64_t, int32_t>, std::pair<double, double>> cpu_samples_;
};

// "2026-12-01T08:00:00Z".
std::string FormatUnix(double unix);

}  // namespace athanor::coord
