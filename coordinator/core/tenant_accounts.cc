#include "coordinator/core/tenant_accounts.h"

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
        {job.spec.tenant, job.id, gs, holding ? job.spec.nodes * job.spec.gpus_per_node : 0});
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

void TenantAccounts::TrackUse(JobRecord* job, const RankReport& r) {
  if (r.phase != RankPhase::kRunning) return;
  const double now = clock_->UnixNow();
  if (r.gpu_utilization >= 0) {  // a real GPU: its utilisation decides
    if (r.gpu_utilization >= 100.0 * options_->idle_cpu_fraction) {
      MarkActive(job, now, "gpu", absl::StrFormat("%.0f%% utilisation", r.gpu_utilization));
    }
    return;
  }
  if (r.cpu_seconds < 0) return;
  auto key = std::make_pair(job->seq, r.rank);
  auto it = cpu_samples_.find(key);
  if (it == cpu_samples_.end()) {
    cpu_samples_[key] = {r.cpu_seconds, now};
    return;
  }
  auto [cpu0, t0] = it->second;
  if (now - t0 < 0.5) return;  // too short a window to average over
  it->second = {r.cpu_seconds, now};
  const double cores = (r.cpu_seconds - cpu0) / (now - t0);
  if (cores < options_->idle_cpu_fraction) return;
  MarkActive(job, now, "cpu", absl::StrFormat("%.2f cores", cores));
}

void TenantAccounts::MarkActive(JobRecord* job, double now, std::string signal, std::string detail) {
  job->last_active_unix = now;
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
  const double reclaim_at =
      job->last_active_unix + timeout + ToSeconds(options_->idle_reclaim_grace);
  if (idle >= timeout && !job->idle_warned) {
    job->idle_warned = true;
    job->reason = absl::StrCat("idle since ", FormatUnix(job->last_active_unix), "; reclaim at ",
                               FormatUnix(reclaim_at));
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
  for (auto it = cpu_samples_.lower_bound({seq, INT32_MIN});
       it != cpu_samples_.end() && it->first.first == seq;) {
    it = cpu_samples_.erase(it);
  }
}

}  // namespace athanor::coord
