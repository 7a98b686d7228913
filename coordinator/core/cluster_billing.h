// ClusterBilling: billing's commands and checks on the cluster state. A
// facet of ClusterState (ClusterState::billing()), like ClusterAdmin: prices,
// plans and credit (an admin's), bills and balances (a tenant's own), and
// Enforce(), which ClusterState::Tick runs: it meters attempts holding GPUs,
// grants allowances, and acts on each tenant's credit level (bill.h):
//   - low and very low: a notice to the tenant's running ranks (appended to
//     their logs), the coordinator's log, and the level in bills and the
//     dashboard;
//   - out of credit: the tenant's pending jobs, queued now or later, are held
//     with a `why` that says so, and its running attempts are stopped as a
//     preemption (SIGTERM, the job's grace to checkpoint, requeued without a
//     restart);
//   - credit again (a top-up, a new month's allowance, a higher limit): the
//     hold goes and the jobs start again from their checkpoints.
// A tenant without a plan is billed but never limited.
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/billing/ledger.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

class ClusterState;

class ClusterBilling {
 public:
  explicit ClusterBilling(ClusterState& state) : state_(state) {}

  // Billing's records from the store (after a restart); InvalidArgument
  // when the ledger does not read (tenant_billing.h).
  absl::Status Restore(std::vector<billing::Price> prices, std::vector<billing::Plan> plans,
                       std::vector<billing::LedgerEntry> ledger);
  absl::StatusOr<billing::Price> SetPrice(const billing::Price& price);
  absl::Status SetPlan(const billing::Plan& plan);
  absl::StatusOr<billing::LedgerEntry> AddCredit(const std::string& tenant, int64_t amount_micros,
                                                 const std::string& note);

  // ---- reads, over a const state (CoreBilling reads under the read lock).
  // `month` "YYYY-MM" or "" (this month); InvalidArgument for another form.
  static absl::StatusOr<billing::Bill> Bill(const ClusterState& state, const std::string& tenant,
                                            const std::string& month);
  // One tenant's ("" : every tenant with a plan or an entry).
  static std::vector<billing::TenantBalance> Balances(const ClusterState& state,
                                                      const std::string& tenant = "");
  static std::vector<billing::Price> Prices(const ClusterState& state);
  static std::vector<billing::Plan> Plans(const ClusterState& state);
  static const Ledger& LedgerOf(const ClusterState& state);

  // Metering, allowances and credit levels; every Tick.
  void Enforce();

 private:
  ClusterState& state_;
};

}  // namespace athanor::coord
