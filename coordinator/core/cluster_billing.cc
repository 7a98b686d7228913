#include "coordinator/core/cluster_billing.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/money.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::Status ClusterBilling::Restore(std::vector<billing::Price> prices,
                                     std::vector<billing::Plan> plans,
                                     std::vector<billing::LedgerEntry> ledger) {
  return state_.billing_.Restore(std::move(prices), std::move(plans), std::move(ledger));
}

absl::StatusOr<billing::Price> ClusterBilling::SetPrice(const billing::Price& price) {
  return state_.billing_.SetPrice(price);
}

absl::Status ClusterBilling::SetPlan(const billing::Plan& plan) {
  if (absl::Status s = state_.billing_.SetPlan(plan); !s.ok()) return s;
  Enforce();
  return absl::OkStatus();
}

absl::StatusOr<billing::LedgerEntry> ClusterBilling::AddCredit(const std::string& tenant,
                                                               int64_t amount_micros,
                                                               const std::string& note) {
  absl::StatusOr<billing::LedgerEntry> entry =
      state_.billing_.AddCredit(tenant, amount_micros, note);
  if (entry.ok()) Enforce();
  return entry;
}

absl::StatusOr<billing::Bill> ClusterBilling::Bill(const ClusterState& state,
                                                   const std::string& tenant,
                                                   const std::string& month) {
  const JobLifecycle& jobs = state.jobs_;
  return state.billing_.Bill(tenant, month, [&jobs](const std::string& id) {
    const JobRecord* job = jobs.Find(id);
    return job == nullptr ? std::string() : job->spec.name;
  });
}

std::vector<billing::TenantBalance> ClusterBilling::Balances(const ClusterState& state,
                                                             const std::string& tenant) {
  return state.billing_.Balances(tenant);
}

std::vector<billing::Price> ClusterBilling::Prices(const ClusterState& state) {
  return state.billing_.prices().all();
}

std::vector<billing::Plan> ClusterBilling::Plans(const ClusterState& state) {
  return state.billing_.Plans();
}

const Ledger& ClusterBilling::LedgerOf(const ClusterState& state) { return state.billing_.ledger(); }

void ClusterBilling::Enforce() {
  TenantBilling& b = state_.billing_;
  JobLifecycle& jobs = state_.jobs_;
  b.GrantAllowances();
  // The running attempts by tenant, found once a tick (the loops below are
  // per plan). A tenant near the end of its credit is metered every tick,
  // so that it is stopped when it runs out, not up to an interval later.
  std::map<std::string, std::vector<JobRecord*>> by_tenant;
  for (int64_t seq : jobs.active()) {
    JobRecord* job = jobs.Mutable(std::to_string(seq));
    if (job == nullptr) continue;
    b.Meter(*job, b.Level(job->spec.tenant) != CreditLevel::kOk);
    by_tenant[job->spec.tenant].push_back(job);
  }
  for (const billing::Plan& plan : b.Plans()) {
    const std::string& tenant = plan.tenant();
    const CreditLevel level = b.Level(tenant);
    const bool held = state_.credit_held_.count(tenant) > 0;
    auto running = by_tenant.find(tenant);
    if (level == CreditLevel::kOk && !held && running == by_tenant.end()) continue;
    const std::string left = FormatMoney(Available(b.ledger(), &plan, tenant));
    std::string notice;
    if (level == CreditLevel::kLow || level == CreditLevel::kVeryLow) {
      notice = absl::StrCat("credit ", CreditLevelName(level), ": tenant ", tenant, " has ", left,
                            " left; its jobs are stopped when it runs out");
    } else if (level == CreditLevel::kOut) {
      notice = absl::StrCat("out of credit: tenant ", tenant, " has ", left,
                            " left; stopping (checkpoint now)");
    }
    if (level == CreditLevel::kOut && !held) {
      state_.credit_held_.insert(tenant);
      state_.sched_.SetTenantHold(
          tenant, absl::StrCat("held: tenant ", tenant, " is out of credit (", left,
                               " left); jobs start again once an admin adds credit"));
      ATHANOR_LOG(WARNING) << "tenant " << tenant << " is out of credit (" << left
                           << " left): its jobs are held and its running attempts stopped";
    } else if (level != CreditLevel::kOut && held) {
      state_.credit_held_.erase(tenant);
      state_.sched_.SetTenantHold(tenant, "");
      state_.ScheduleInline();
      ATHANOR_LOG(INFO) << "tenant " << tenant << " has credit again (" << left
                        << " left): its jobs may start";
    }
    if (running == by_tenant.end()) continue;
    for (JobRecord* job : running->second) {
      if (job->billing_notice != notice) {
        if (!notice.empty()) ATHANOR_LOG(INFO) << "job " << job->id << ": " << notice;
        job->billing_notice = notice;
        TouchAttemptNodes(&state_.log_, *job);  // the notice reaches the ranks' logs
      }
      if (level == CreditLevel::kOut && !job->stopping) {
        jobs.BeginPreempt(job, GraceOf(*job, state_.options_), PreemptCause::kCredit,
                          absl::StrCat("stopped: tenant ", tenant, " is out of credit"));
      }
    }
  }
}

}  // namespace athanor::coord
