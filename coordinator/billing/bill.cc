#include "coordinator/billing/bill.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "coordinator/billing/calendar.h"

namespace athanor::coord {

const char* CreditLevelName(CreditLevel level) {
  switch (level) {
    case CreditLevel::kOk: return "ok";
    case CreditLevel::kLow: return "low";
    case CreditLevel::kVeryLow: return "very low";
    case CreditLevel::kOut: return "out of credit";
  }
  return "ok";
}

int64_t Available(const Ledger& ledger, const billing::Plan* plan, const std::string& tenant) {
  return ledger.Balance(tenant) + (plan == nullptr ? 0 : plan->credit_limit_micros());
}

CreditLevel LevelOf(const Ledger& ledger, const billing::Plan* plan, const std::string& tenant) {
  if (plan == nullptr) return CreditLevel::kOk;
  const int64_t left = Available(ledger, plan, tenant);
  if (left <= 0) return CreditLevel::kOut;
  const int64_t funded = ledger.FundedBalance(tenant) + plan->credit_limit_micros();
  if (funded > 0 && left * 10 <= funded) return CreditLevel::kVeryLow;
  const int64_t warn = plan->warn_micros() > 0 ? plan->warn_micros() : funded / 5;
  if (left <= warn) return CreditLevel::kLow;
  return CreditLevel::kOk;
}

std::vector<billing::LedgerEntry> AllowanceEntries(const Ledger& ledger, const billing::Plan& plan,
                                                   int64_t now_ms) {
  const std::string& tenant = plan.tenant();
  const std::string month = MonthOf(now_ms);
  std::vector<billing::LedgerEntry> out;
  if (plan.monthly_allowance_micros() <= 0 || ledger.HasMonthEntry(tenant, billing::GRANT, month)) {
    return out;
  }
  // What each month granted and what was spent in it (refunds count in the
  // month they were made).
  std::map<std::string, int64_t> granted, spent;
  for (const billing::LedgerEntry& e : ledger.entries()) {
    if (e.tenant() != tenant) continue;
    if (e.kind() == billing::GRANT) granted[e.note()] += e.amount_micros();
    if (e.kind() == billing::ACCRUAL) spent[MonthOf(e.span_start_unix_ms())] -= e.amount_micros();
    if (e.kind() == billing::REFUND) spent[MonthOf(e.created_unix_ms())] -= e.amount_micros();
  }
  for (const auto& [old, amount] : granted) {
    if (old == month || ledger.HasMonthEntry(tenant, billing::EXPIRY, old)) continue;
    billing::LedgerEntry& expiry = out.emplace_back();
    expiry.set_tenant(tenant);
    expiry.set_kind(billing::EXPIRY);
    expiry.set_amount_micros(-std::max<int64_t>(0, amount - spent[old]));
    expiry.set_created_unix_ms(now_ms);
    expiry.set_note(old);
  }
  billing::LedgerEntry& grant = out.emplace_back();
  grant.set_tenant(tenant);
  grant.set_kind(billing::GRANT);
  grant.set_amount_micros(plan.monthly_allowance_micros());
  grant.set_created_unix_ms(now_ms);
  grant.set_note(month);
  return out;
}

billing::TenantBalance BalanceOf(const Ledger& ledger, const billing::Plan* plan,
                                 const std::string& tenant) {
  billing::TenantBalance b;
  b.set_tenant(tenant);
  b.set_balance_micros(ledger.Balance(tenant));
  b.set_available_micros(Available(ledger, plan, tenant));
  b.set_spent_micros(ledger.Spent(tenant));
  b.set_status(CreditLevelName(LevelOf(ledger, plan, tenant)));
  return b;
}

billing::Bill MakeBill(const Ledger& ledger, const PriceBook& book, const billing::Plan* plan,
                       const std::string& tenant, const std::string& month,
                       const std::function<std::string(const std::string&)>& job_name) {
  billing::Bill bill;
  bill.set_tenant(tenant);
  bill.set_month(month);
  std::map<AccrualKey, billing::BillLine> lines;
  std::map<std::string, int64_t> daily;
  for (const billing::LedgerEntry& e : ledger.entries()) {
    if (e.tenant() != tenant) continue;
    switch (e.kind()) {
      case billing::ACCRUAL: {
        if (MonthOf(e.span_start_unix_ms()) != month) break;
        billing::BillLine& line = lines[KeyOf(e)];
        line.set_job_id(e.job_id());
        line.set_attempt(e.attempt());
        line.set_gpu_model(e.gpu_model());
        line.set_gpus(e.gpus());
        line.set_seconds(line.seconds() +
                         (e.span_end_unix_ms() - e.span_start_unix_ms()) / 1000.0);
        line.set_amount_micros(line.amount_micros() - e.amount_micros());
        bill.set_charged_micros(bill.charged_micros() - e.amount_micros());
        daily[DayOf(e.span_start_unix_ms())] -= e.amount_micros();
        break;
      }
      case billing::REFUND: {
        if (MonthOf(e.created_unix_ms()) != month) break;
        auto it = lines.find(KeyOf(e));
        if (it != lines.end()) {
          it->second.set_refunded(true);
          it->second.set_amount_micros(it->second.amount_micros() - e.amount_micros());
        }
        bill.set_charged_micros(bill.charged_micros() - e.amount_micros());
        daily[DayOf(e.created_unix_ms())] -= e.amount_micros();
        break;
      }
      case billing::CREDIT:
        if (MonthOf(e.created_unix_ms()) == month) {
          bill.set_credited_micros(bill.credited_micros() + e.amount_micros());
        }
        break;
      case billing::GRANT:
        if (e.note() == month) bill.set_allowance_micros(bill.allowance_micros() + e.amount_micros());
        break;
      default:
        break;
    }
  }
  for (auto& [key, line] : lines) {
    const billing::Price* price = nullptr;
    for (const billing::Price& p : book.all()) {
      if (p.gpu_model() == key.price_model && p.effective_unix_ms() == key.price_effective_unix_ms) {
        price = &p;
      }
    }
    line.set_gpu_hour_micros(price == nullptr ? 0 : price->gpu_hour_micros());
    line.set_job_name(job_name(key.job_id));
    *bill.add_lines() = std::move(line);
  }
  for (const auto& [day, amount] : daily) {
    billing::DailySpend* d = bill.add_daily();
    d->set_day(day);
    d->set_amount_micros(amount);
  }
  bill.set_allowance_left_micros(
      std::max<int64_t>(0, bill.allowance_micros() - bill.charged_micros()));
  bill.set_balance_micros(ledger.Balance(tenant));
  bill.set_available_micros(Available(ledger, plan, tenant));
  bill.set_status(CreditLevelName(LevelOf(ledger, plan, tenant)));
  return bill;
}

}  // namespace athanor::coord
