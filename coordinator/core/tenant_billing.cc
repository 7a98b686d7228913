#include "coordinator/core/tenant_billing.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/money.h"
#include "coordinator/billing/calendar.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {

int64_t ToUnixMs(double unix_seconds) { return std::llround(unix_seconds * 1000.0); }

TenantBilling::TenantBilling(const StateOptions* options, ChangeLog* log, const WallClock* clock,
                             const NodeTable* nodes)
    : options_(options), log_(log), clock_(clock), nodes_(nodes) {}

int64_t TenantBilling::NowMs() const { return ToUnixMs(clock_->UnixNow()); }

absl::Status TenantBilling::Restore(std::vector<billing::Price> prices,
                                    std::vector<billing::Plan> plans,
                                    std::vector<billing::LedgerEntry> ledger) {
  book_.Restore(std::move(prices));
  plans_.clear();
  for (billing::Plan& p : plans) plans_[p.tenant()] = std::move(p);
  return ledger_.Restore(std::move(ledger));
}

absl::StatusOr<billing::Price> TenantBilling::SetPrice(billing::Price price) {
  if (absl::Status s = book_.Set(&price, NowMs()); !s.ok()) return s;
  log_->MarkPrice(price);
  ATHANOR_LOG(INFO) << "price of " << price.gpu_model() << " from " << price.effective_unix_ms()
                    << " ms: " << FormatMoney(price.gpu_hour_micros()) << " per GPU-hour";
  return price;
}

absl::Status TenantBilling::SetPlan(const billing::Plan& plan) {
  if (absl::Status s = ValidateName("tenant", plan.tenant()); !s.ok()) return s;
  if (plan.monthly_allowance_micros() < 0 || plan.credit_limit_micros() < 0 ||
      plan.warn_micros() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan of ", plan.tenant(), ": amounts must not be negative"));
  }
  if (plan.monthly_allowance_micros() > kMaxAmountMicros ||
      plan.credit_limit_micros() > kMaxAmountMicros || plan.warn_micros() > kMaxAmountMicros) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan of ", plan.tenant(), ": amounts of at most 1000000000.00"));
  }
  plans_[plan.tenant()] = plan;
  log_->MarkPlan(plan);
  GrantAllowances();
  return absl::OkStatus();
}

absl::StatusOr<billing::LedgerEntry> TenantBilling::AddCredit(const std::string& tenant,
                                                             int64_t amount_micros,
                                                             const std::string& note) {
  if (absl::Status s = ValidateName("tenant", tenant); !s.ok()) return s;
  if (amount_micros <= 0 || amount_micros > kMaxAmountMicros) {
    return absl::InvalidArgumentError(absl::StrCat(
        "credit for ", tenant, ": the amount must be above zero and at most 1000000000.00"));
  }
  if (note.size() > 512) {
    return absl::InvalidArgumentError(absl::StrCat("credit note: ", note.size(),
                                                   " bytes, at most 512"));
  }
  billing::LedgerEntry e;
  e.set_tenant(tenant);
  e.set_kind(billing::CREDIT);
  e.set_amount_micros(amount_micros);
  e.set_created_unix_ms(NowMs());
  e.set_note(note);
  Append(std::move(e));
  ATHANOR_LOG(INFO) << "credit of " << FormatMoney(amount_micros) << " for " << tenant
                    << "; balance " << FormatMoney(ledger_.Balance(tenant));
  return ledger_.entries().back();
}

void TenantBilling::Append(billing::LedgerEntry entry) {
  log_->MarkLedger(ledger_.Append(std::move(entry)));
}

AttemptHold TenantBilling::HoldOf(const JobRecord& job) const {
  AttemptHold hold{job.spec.tenant, job.id, job.attempt, {}};
  std::set<std::string> seen;
  std::map<std::string, HeldShare> by_model;
  for (const RankPlacement& p : job.allocation) {
    if (!seen.insert(p.node).second) continue;
    std::optional<NodeRecord> node = nodes_->Get(p.node);
    const std::string model = node ? node->inventory.gpu_model : "";
    HeldShare& share = by_model[model];
    share.gpu_model = model;
    share.gpus += job.spec.gpus_per_node;
    share.cpus += job.spec.cpus_per_node;
    share.memory_mb += job.spec.memory_mb_per_node;
  }
  for (auto& [model, share] : by_model) hold.shares.push_back(std::move(share));
  return hold;
}

void TenantBilling::Charge(const JobRecord& job, int64_t to_ms) {
  if (job.usage.empty() || job.attempt <= 0) return;
  const int64_t start_ms = ToUnixMs(job.usage.back().start);
  const int64_t from_ms = std::max(start_ms, ledger_.MeteredUntil(job.id, job.attempt));
  for (billing::LedgerEntry& e :
       Accruals(ledger_, book_, HoldOf(job), from_ms, to_ms, NowMs())) {
    Append(std::move(e));
  }
}

void TenantBilling::Meter(const JobRecord& job, bool at_once) {
  if (!job.allocated || job.usage.empty() || job.usage.back().end != 0) return;
  const int64_t now = NowMs();
  const int64_t since = std::max(ToUnixMs(job.usage.back().start),
                                 ledger_.MeteredUntil(job.id, job.attempt));
  const int64_t interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_->billing_interval).count();
  if (!at_once && now - since < interval) return;
  Charge(job, now);
}

void TenantBilling::Release(const JobRecord& job, bool platform_fault) {
  if (job.usage.empty() || job.usage.back().end == 0) return;
  Charge(job, ToUnixMs(job.usage.back().end));
  const billing::Plan* plan = PlanOf(job.spec.tenant);
  if (!platform_fault || plan == nullptr || !plan->free_platform_faults() ||
      ledger_.Refunded(job.id, job.attempt)) {
    return;
  }
  for (billing::LedgerEntry& e : Refunds(ledger_, job.spec.tenant, job.id, job.attempt,
                                         "ended by the platform", NowMs())) {
    Append(std::move(e));
  }
}

void TenantBilling::GrantAllowances() {
  const int64_t now = NowMs();
  for (const auto& [tenant, plan] : plans_) {
    for (billing::LedgerEntry& e : AllowanceEntries(ledger_, plan, now)) Append(std::move(e));
  }
}

CreditLevel TenantBilling::Level(const std::string& tenant) const {
  return LevelOf(ledger_, PlanOf(tenant), tenant);
}

const billing::Plan* TenantBilling::PlanOf(const std::string& tenant) const {
  auto it = plans_.find(tenant);
  return it == plans_.end() ? nullptr : &it->second;
}

std::vector<billing::Plan> TenantBilling::Plans() const {
  std::vector<billing::Plan> out;
  for (const auto& [tenant, plan] : plans_) out.push_back(plan);
  return out;
}

absl::StatusOr<billing::Bill> TenantBilling::Bill(
    const std::string& tenant, const std::string& month,
    const std::function<std::string(const std::string&)>& job_name) const {
  const std::string m = month.empty() ? MonthOf(NowMs()) : month;
  if (absl::Status s = ParseMonth(m).status(); !s.ok()) return s;
  return MakeBill(ledger_, book_, PlanOf(tenant), tenant, m, job_name);
}

std::vector<billing::TenantBalance> TenantBilling::Balances(const std::string& tenant) const {
  std::set<std::string> tenants = ledger_.Tenants();
  for (const auto& [t, plan] : plans_) tenants.insert(t);
  std::vector<billing::TenantBalance> out;
  for (const std::string& t : tenants) {
    if (tenant.empty() || t == tenant) out.push_back(BalanceOf(ledger_, PlanOf(t), t));
  }
  return out;
}

}  // namespace athanor::coord
