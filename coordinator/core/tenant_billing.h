// TenantBilling: billing wired into the coordinator's state. It owns the
// price book, the tenants' plans and the ledger (coordinator/billing/), and
//   - meters every attempt holding GPUs: accruals at least every
//     StateOptions::billing_interval and at release, from launch to release,
//     by the GPU model of each of its nodes (meter.h);
//   - refunds an attempt the platform ended (a node lost, a hang blamed on a
//     node, a preemption for a higher priority, a squatted master port) when
//     the tenant's plan says so;
//   - grants each plan's monthly allowance and expires the unused rest;
//   - says where each tenant stands (bill.h's CreditLevel), for ClusterState
//     to warn, hold and stop (ClusterState::CheckCredit).
// Every entry it appends is marked in the ChangeLog and so becomes durable
// in the same commit as the records that caused it: the ledger is the only
// memory of what was charged, and a restart resumes each attempt's metering
// exactly where its last durable accrual ended.
//
// Not thread-safe: confined to ClusterState's owner. Collaborators are not
// owned and outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/billing/bill.h"
#include "coordinator/billing/ledger.h"
#include "coordinator/billing/meter.h"
#include "coordinator/billing/price_book.h"
#include "coordinator/core/node_table.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/wall_clock.h"

namespace athanor::coord {

// The most a plan's amounts or one top-up may be: 1,000,000,000.00, so that
// no balance can overflow.
inline constexpr int64_t kMaxAmountMicros = 1000000000LL * 1000000;

class TenantBilling {
 public:
  TenantBilling(const StateOptions* options, ChangeLog* log, const WallClock* clock,
                const NodeTable* nodes);

  // What the store held. InvalidArgument when the ledger does not read.
  absl::Status Restore(std::vector<billing::Price> prices, std::vector<billing::Plan> plans,
                       std::vector<billing::LedgerEntry> ledger);

  // ---- admin
  // The price as kept (effective time filled in); InvalidArgument naming
  // what is wrong (price_book.h).
  absl::StatusOr<billing::Price> SetPrice(billing::Price price);
  absl::Status SetPlan(const billing::Plan& plan);
  // A top-up; InvalidArgument unless amount > 0 and the tenant is a valid name.
  absl::StatusOr<billing::LedgerEntry> AddCredit(const std::string& tenant, int64_t amount_micros,
                                                 const std::string& note);

  // ---- metering
  // Charges `job`'s attempt (holding GPUs) up to now when the interval has
  // passed since its last accrual, or at once with `now`.
  void Meter(const JobRecord& job, bool now = false);
  // `job`'s attempt released its GPUs (its usage interval is closed):
  // charges it to the release, then refunds it when `platform_fault` and the
  // tenant's plan makes platform faults free.
  void Release(const JobRecord& job, bool platform_fault);
  // Unix seconds up to which `job`'s current attempt was charged (0: not yet).
  double MeteredUntil(const JobRecord& job) const {
    return static_cast<double>(ledger_.MeteredUntil(job.id, job.attempt)) / 1000.0;
  }
  // Grants the month's allowance of every plan that has one (and expires
  // the last month's unused rest), once per month.
  void GrantAllowances();

  // ---- reads
  CreditLevel Level(const std::string& tenant) const;
  const billing::Plan* PlanOf(const std::string& tenant) const;
  std::vector<billing::Plan> Plans() const;
  const PriceBook& prices() const { return book_; }
  const Ledger& ledger() const { return ledger_; }
  // InvalidArgument for a malformed month; "" means this month.
  absl::StatusOr<billing::Bill> Bill(const std::string& tenant, const std::string& month,
                                     const std::function<std::string(const std::string&)>& job_name) const;
  // Every tenant with a plan or an entry, by name ("" : all).
  std::vector<billing::TenantBalance> Balances(const std::string& tenant = "") const;

 private:
  AttemptHold HoldOf(const JobRecord& job) const;
  void Charge(const JobRecord& job, int64_t to_ms);
  void Append(billing::LedgerEntry entry);
  int64_t NowMs() const;

  const StateOptions* const options_;
  ChangeLog* const log_;
  const WallClock* const clock_;
  const NodeTable* const nodes_;
  PriceBook book_;
  std::map<std::string, billing::Plan> plans_;
  Ledger ledger_;
};

// Unix seconds as the ledger's milliseconds.
int64_t ToUnixMs(double unix_seconds);

}  // namespace athanor::coord
