#include "coordinator/core/tenant_accounts.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {

std::string FormatUnix(double unix) {
  time_t t = static_cast<time_t>(unix);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

TenantAccounts::TenantAccounts(const StateOptions* options, sched::Scheduler* sched,
                               ChangeLog* log, const WallClock* clock)
    : options_(options), sched_(sched), log_(log), clock_(clock), quotas_(options->quotas) {
  for (const auto& [tenant, gpus] : quotas_) sched_->SetTenant(tenant, gpus);
}

void TenantAccounts::RestoreQuotas(const std::map<std::string, int32_t>& stored) {
  for (const auto& [tenant, gpus] : stored) {
    if (gpus < 0) {
      quotas_.erase(tenant);
    } else {
      quotas_[tenant] = gpus;
    }
    sched_->SetTenant(tenant, gpus < 0 ? -1 : gpus);
  }
}

absl::Status TenantAccounts::SetQuota(const std::string& tenant, int32_t gpus) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  if (gpus < 0) {
    quotas_.erase(tenant);
  } else {
    quotas_[tenant] = gpus;
  }
  sched_->SetTenant(tenant, gpus < 0 ? -1 : gpus);
  log_->MarkQuota(tenant, gpus < 0 ? -1 : gpus);
  ATHANOR_LOG(INFO) << "quota of tenant " << tenant << ": "
                    << (gpus < 0 ? std::string("none") : absl::StrCat(gpus, " GPUs"));
  return absl::OkStatus();
}

std::vector<QuotaRow> TenantAccounts::Quotas() const {
  std::vector<QuotaRow> out;
  for (const auto& [tenant, gpus] : quotas_) {
    out.push_back({tenant, gpus, sched_->view().accounting().GpusInUse(tenant)});
  }
  return out;
}

std::vector<UsageRow> TenantAccounts::Usage(const std::map<int64_t, JobRecord>& jobs,
                                            const std::string& tenant, double since_unix) const {
  const double now = clock_->UnixNow();
  std::map<std::string, std::vector<UsageRow>> by_tenant;
  for (const auto& [seq, job] : jobs) {
    if (!tenant.empty() && job.spec.tenant != tenant) continue;
    if (job.usage.empty()) continue;
    double gs = JobGpuSeconds(job, now, since_unix);
    bool holding = job.usage.back().end == 0;
    if (gs <= 0 && !holding) continue;
    by_tenant[job.spec.tenant].push_back(
        {job.spec.tenant, job.id, gs, holding ? job.usage.back().gpus : 0});
  }
  std::vector<UsageRow> out;
  for (auto& [t, rows] : by_tenant) {
    UsageRow total{t, "", 0, 0};
    for (const UsageRow& r : rows) {
      total.gpu_seconds += r.gpu_seconds;
      total.gpus_in_use += r.gpus_in_use;
    }
    out.push_back(total);
    for (UsageRow& r : rows) out.push_back(std::move(r));
  }
  return out;
}

namespace {

// "1.2 MB/s" (SI units, as network rates are given).
std::string FormatRate(double bytes_per_s) {
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.1f GB/s", bytes_per_s / 1e9);
  if (bytes_per_s >= 1e6) return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
  if (bytes_per_s >= 1e3) return absl::StrFormat("%.1f kB/s", bytes_per_s / 1e3);
  return absl::StrFormat("%.0f B/s", bytes_per_s);
}

}  // namespace

void TenantAccounts::TrackUse(JobRecord* job, const RankReport& r) {
  if (r.phase != RankPhase::kRunning) return;
  const double now = clock_->UnixNow();
  auto [it, first] = samples_.try_emplace(std::make_pair(job->seq, r.rank));
  UseSample& last = it->second;
  // Signals in the order they are preferred when several count (header).
  std::optional<std::pair<std::string, std::string>> use;
  auto count = [&](const char* signal, std::string detail) {
    if (!use) use.emplace(signal, std::move(detail));
  };
  if (r.gpu_utilization >= 0 && r.gpu_utilization >= 100.0 * options_->idle_cpu_fraction) {
    count("gpu", absl::StrFormat("%.0f%% utilisation", r.gpu_utilization));
  }
  if (r.kernels_busy > 0) {
    count("kernel", absl::StrCat(r.kernels_busy, r.kernels_busy == 1 ? " kernel" : " kernels", " busy"));
  } else if (!first && r.kernel_last_activity_unix > last.kernel_last_activity_unix) {
    count("kernel", absl::StrCat("kernel active at ",
                                 FormatUnix(static_cast<double>(r.kernel_last_activity_unix))));
  }
  last.kernel_last_activity_unix = std::max(last.kernel_last_activity_unix, r.kernel_last_activity_unix);
  // Rates over the window since the figure's last sample; a window under
  // 0.5 s is too short to average over and waits for a later report.
  if (r.activity_measured) {
    const double dt = now - last.counters_at;
    if (last.counters_at > 0 && dt >= 0.5) {
      const double net = (r.net_bytes - last.net_bytes) / dt;
      const double disk = (r.disk_write_bytes - last.disk_bytes) / dt;
      if (net >= options_->idle_net_bytes_per_s) count("network", FormatRate(net));
      if (disk >= options_->idle_disk_bytes_per_s) count("disk", FormatRate(disk) + " written");
    }
    if (last.counters_at <= 0 || dt >= 0.5) {
      last.counters_at = now;
      last.net_bytes = r.net_bytes;
      last.disk_bytes = r.disk_write_bytes;
    }
  }
  // Where the GPU is measured it decides; the CPU that feeds it is not asked.
  if (r.gpu_utilization < 0 && r.cpu_seconds >= 0) {
    const double dt = now - last.cpu_at;
    if (last.cpu_at > 0 && dt >= 0.5) {
      const double cores = (r.cpu_seconds - last.cpu_seconds) / dt;
      if (cores >= options_->idle_cpu_fraction) count("cpu", absl::StrFormat("%.2f cores", cores));
    }
    if (last.cpu_at <= 0 || dt >= 0.5) {
      last.cpu_at = now;
      last.cpu_seconds = r.cpu_seconds;
    }
  }
  if (use) MarkActive(job, now, std::move(use->first), std::move(use->second));
}

double TenantAccounts::ReclaimAt(const JobRecord& job) const {
  return job.last_active_unix + static_cast<double>(job.spec.idle_timeout_s) +
         ToSeconds(options_->idle_reclaim_grace);
}

void TenantAccounts::MarkActive(JobRecord* job, double now, std::string signal, std::string detail) {
  job->last_active_unix = now;
  if (job->spec.idle_timeout_s > 0) job->reclaim_at_unix = ReclaimAt(*job);
  // The signal is kept with the record; it is written with the next change
  // of the job (a warning's end, a stop), not on every sample.
  job->last_activity = Activity{std::move(signal), now, std::move(detail)};
  if (job->idle_warned) {
    job->idle_warned = false;
    job->reason = "";
    log_->MarkJob(job->seq);
    TouchAttemptNodes(log_, *job);  // the notice goes
  }
}

std::optional<std::string> TenantAccounts::CheckIdle(JobRecord* job) {
  if (!job->spec.interactive || job->spec.idle_timeout_s <= 0 || job->stopping ||
      job->state != JobState::kRunning) {
    return std::nullopt;
  }
  const double now = clock_->UnixNow();
  if (job->last_active_unix <= 0) job->last_active_unix = now;
  const double idle = now - job->last_active_unix;
  const double timeout = static_cast<double>(job->spec.idle_timeout_s);
  const double reclaim_at = ReclaimAt(*job);
  job->reclaim_at_unix = reclaim_at;
  if (idle >= timeout && !job->idle_warned) {
    job->idle_warned = true;
    job->reason = absl::StrFormat("idle since %s; reclaim in %.0f s, at %s, unless used (athanor alloc --keep %s)",
                                  FormatUnix(job->last_active_unix), std::ceil(reclaim_at - now),
                                  FormatUnix(reclaim_at), job->id);
    ATHANOR_LOG(INFO) << "job " << job->id << ": " << job->reason;
    log_->MarkJob(job->seq);
    TouchAttemptNodes(log_, *job);  // the notice reaches the rank's log
  }
  if (job->idle_warned && now >= reclaim_at) {
    return absl::StrFormat("reclaimed: idle for %.0f s", std::floor(idle));
  }
  return std::nullopt;
}

void TenantAccounts::Forget(int64_t seq) {
  for (auto it = samples_.lower_bound({seq, INT32_MIN});
       it != samples_.end() && it->first.first == seq;) {
    it = samples_.erase(it);
  }
}

}  // namespace athanor::coord
