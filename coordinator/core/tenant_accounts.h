// TenantAccounts: what tenants may hold and what they used. GPU quotas (from
// --quota, overridden by `athanor quota set`, which persists), GPU-time usage
// per tenant and job, and idle reclaim of interactive allocations (use seen
// in agents' figures, a warning, then a reclaim).
//
// Use, each signal against its own threshold (StateOptions): GPU
// utilisation where measured (it then stands for the CPU, which feeds it),
// else CPU time; network bytes in and out and disk writes per second, over
// the window between two samples of a rank at least 0.5 s apart (counters
// that fell, a process having ended, give no figure that time); a notebook
// kernel busy now, or whose last activity is newer than the last sample's.
// When several count at once the first of gpu, kernel, network, disk, cpu
// is recorded: the CPU is the least telling, every other use costs some.
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
  // Last use + idle timeout + grace.
  double ReclaimAt(const JobRecord& job) const;

  const StateOptions* const options_;
  sched::Scheduler* const sched_;
  ChangeLog* const log_;
  const WallClock* const clock_;
  std::map<std::string, int32_t> quotas_;
  // Interactive jobs: per rank, the last sample its rates are taken against.
  // Each figure's sample keeps its own time: a report may lack one.
  struct UseSample {
    double cpu_at = 0;  // 0: none yet
    double cpu_seconds = 0;
    double counters_at = 0;  // 0: none yet
    double net_bytes = 0;
    double disk_bytes = 0;
    int64_t kernel_last_activity_unix = 0;
  };
  std::map<std::pair<int64_t, int32_t>, UseSample> samples_;
};

// "2026-12-01T08:00:00Z".
std::string FormatUnix(double unix);

}  // namespace athanor::coord
