// Ledger: the append-only list of money movements (billing::LedgerEntry),
// with the sums the rest of billing asks for kept as entries are appended:
// a tenant's balance (the sum of its entries) and spend (its accruals less
// refunds), and per accrual key (job, attempt, GPU model, price) how many
// milliseconds and micro-units were charged, so the next accrual of an
// attempt starts exactly where the last one ended, across coordinator
// restarts (the entries are the only state).
//
// Not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

// What one accrual line charges for: one attempt's GPUs of one model at one
// price (its model, which may be the default "*", and effective time).
struct AccrualKey {
  std::string job_id;
  int32_t attempt = 0;
  std::string gpu_model;
  std::string price_model;
  int64_t price_effective_unix_ms = 0;
  auto operator<=>(const AccrualKey&) const = default;
};
AccrualKey KeyOf(const billing::LedgerEntry& accrual);

class Ledger {
 public:
  // Entries from the store, any order. InvalidArgument on a repeated id.
  absl::Status Restore(std::vector<billing::LedgerEntry> entries);
  // Gives the entry the next id; returns it as kept.
  const billing::LedgerEntry& Append(billing::LedgerEntry entry);

  const std::vector<billing::LedgerEntry>& entries() const { return entries_; }  // by id
  int64_t Balance(const std::string& tenant) const;
  // What the tenant's usage cost, ever: accruals less refunds (>= 0).
  int64_t Spent(const std::string& tenant) const;
  // The balance right after the tenant's newest CREDIT or GRANT (0: none).
  int64_t FundedBalance(const std::string& tenant) const;
  std::set<std::string> Tenants() const;

  struct Totals {
    int64_t ms = 0;      // span charged so far
    int64_t amount = 0;  // what it cost (<= 0)
  };
  Totals TotalsOf(const AccrualKey& key) const;
  // Where the attempt's accruals end; 0 when it has none.
  int64_t MeteredUntil(const std::string& job_id, int32_t attempt) const;
  // The attempt's accrual keys, with their totals.
  std::vector<std::pair<AccrualKey, Totals>> KeysOf(const std::string& job_id,
                                                    int32_t attempt) const;
  bool Refunded(const std::string& job_id, int32_t attempt) const;
  // Whether a GRANT or EXPIRY of `month` ("YYYY-MM") was written for the tenant.
  bool HasMonthEntry(const std::string& tenant, billing::EntryKind kind,
                     const std::string& month) const;

 private:
  void Index(const billing::LedgerEntry& e);

  std::vector<billing::LedgerEntry> entries_;
  std::map<std::string, int64_t> balance_;
  std::map<std::string, int64_t> funded_;
  std::map<std::string, int64_t> spent_;
  std::map<AccrualKey, Totals> totals_;
  std::map<std::pair<std::string, int32_t>, int64_t> metered_until_;
  std::set<std::pair<std::string, int32_t>> refunded_;
  std::set<std::tuple<std::string, int, std::string>> month_entries_;  // tenant, kind, month
};

}  // namespace athanor::coord
