#include "coordinator/billing/ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace athanor::coord {

AccrualKey KeyOf(const billing::LedgerEntry& e) {
  return AccrualKey{e.job_id(), e.attempt(), e.gpu_model(), e.price_model(),
                    e.price_effective_unix_ms()};
}

absl::Status Ledger::Restore(std::vector<billing::LedgerEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.id() < b.id(); });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].id() == entries[i - 1].id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ledger: entry id ", entries[i].id(), " appears twice"));
    }
  }
  *this = Ledger();
  entries_ = std::move(entries);
  for (const billing::LedgerEntry& e : entries_) Index(e);
  return absl::OkStatus();
}

const billing::LedgerEntry& Ledger::Append(billing::LedgerEntry entry) {
  entry.set_id(entries_.empty() ? 1 : entries_.back().id() + 1);
  entries_.push_back(std::move(entry));
  Index(entries_.back());
  return entries_.back();
}

void Ledger::Index(const billing::LedgerEntry& e) {
  int64_t& balance = balance_[e.tenant()];
  balance += e.amount_micros();
  switch (e.kind()) {
    case billing::ACCRUAL: {
      spent_[e.tenant()] -= e.amount_micros();
      Totals& t = totals_[KeyOf(e)];
      t.ms += e.span_end_unix_ms() - e.span_start_unix_ms();
      t.amount += e.amount_micros();
      int64_t& until = metered_until_[{e.job_id(), e.attempt()}];
      until = std::max(until, e.span_end_unix_ms());
      break;
    }
    case billing::REFUND:
      spent_[e.tenant()] -= e.amount_micros();
      refunded_.insert({e.job_id(), e.attempt()});
      break;
    case billing::CREDIT:
      funded_[e.tenant()] = balance;
      break;
    case billing::GRANT:
      funded_[e.tenant()] = balance;
      month_entries_.insert({e.tenant(), e.kind(), e.note()});
      break;
    case billing::EXPIRY:
      month_entries_.insert({e.tenant(), e.kind(), e.note()});
      break;
    default:
      break;
  }
}

int64_t Ledger::Balance(const std::string& tenant) const {
  auto it = balance_.find(tenant);
  return it == balance_.end() ? 0 : it->second;
}

int64_t Ledger::Spent(const std::string& tenant) const {
  auto it = spent_.find(tenant);
  return it == spent_.end() ? 0 : it->second;
}

int64_t Ledger::FundedBalance(const std::string& tenant) const {
  auto it = funded_.find(tenant);
  return it == funded_.end() ? 0 : it->second;
}

std::set<std::string> Ledger::Tenants() const {
  std::set<std::string> out;
  for (const auto& [tenant, balance] : balance_) out.insert(tenant);
  return out;
}

Ledger::Totals Ledger::TotalsOf(const AccrualKey& key) const {
  auto it = totals_.find(key);
  return it == totals_.end() ? Totals{} : it->second;
}

int64_t Ledger::MeteredUntil(const std::string& job_id, int32_t attempt) const {
  auto it = metered_until_.find({job_id, attempt});
  return it == metered_until_.end() ? 0 : it->second;
}

std::vector<std::pair<AccrualKey, Ledger::Totals>> Ledger::KeysOf(const std::string& job_id,
                                                                  int32_t attempt) const {
  std::vector<std::pair<AccrualKey, Totals>> out;
  AccrualKey first{job_id, attempt, "", "", INT64_MIN};
  for (auto it = totals_.lower_bound(first);
       it != totals_.end() && it->first.job_id == job_id && it->first.attempt == attempt; ++it) {
    out.push_back(*it);
  }
  return out;
}

bool Ledger::Refunded(const std::string& job_id, int32_t attempt) const {
  return refunded_.count({job_id, attempt}) > 0;
}

bool Ledger::HasMonthEntry(const std::string& tenant, billing::EntryKind kind,
                           const std::string& month) const {
  return month_entries_.count({tenant, kind, month}) > 0;
}

}  // namespace athanor::coord
