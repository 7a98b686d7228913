// CoreBilling: billing's commands and queries on the running coordinator.
// Commands (prices, plans, credit) run under the state lock and return once
// what they changed is durable (CoordinatorCore::Write); queries (bills,
// balances, prices, plans) read one consistent view (CoordinatorCore::Read).
// Who may call what is the RPC layer's business (auth_policy.cc).
//
// Thread-safe, as the core is. The core is not owned and outlives this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator_core.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

class CoreBilling {
 public:
  explicit CoreBilling(CoordinatorCore* core) : core_(core) {}

  // Every price after it.
  absl::StatusOr<std::vector<billing::Price>> SetPrice(const billing::Price& price);
  // Every plan after it.
  absl::StatusOr<std::vector<billing::Plan>> SetPlan(const billing::Plan& plan);
  // The entry written and the tenant's balance after it.
  absl::StatusOr<std::pair<billing::LedgerEntry, billing::TenantBalance>> AddCredit(
      const std::string& tenant, int64_t amount_micros, const std::string& note);

  std::vector<billing::Price> Prices() const;
  std::vector<billing::Plan> Plans() const;
  // `month` "YYYY-MM" or "" (this month); InvalidArgument for another form.
  absl::StatusOr<billing::Bill> Bill(const std::string& tenant, const std::string& month) const;
  // One tenant's ("" : every tenant with a plan or an entry).
  std::vector<billing::TenantBalance> Balances(const std::string& tenant) const;
  // Every ledger entry of `tenant` ("" : all), by id.
  std::vector<billing::LedgerEntry> Ledger(const std::string& tenant) const;

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
