#include "coordinator/core/core_billing.h"

#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::StatusOr<std::vector<billing::Price>> CoreBilling::SetPrice(const billing::Price& price) {
  std::vector<billing::Price> out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    RETURN_IF_ERROR(s.billing().SetPrice(price).status());
    out = ClusterBilling::Prices(s);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<billing::Plan>> CoreBilling::SetPlan(const billing::Plan& plan) {
  std::vector<billing::Plan> out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    RETURN_IF_ERROR(s.billing().SetPlan(plan));
    out = ClusterBilling::Plans(s);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::pair<billing::LedgerEntry, billing::TenantBalance>> CoreBilling::AddCredit(
    const std::string& tenant, int64_t amount_micros, const std::string& note) {
  std::pair<billing::LedgerEntry, billing::TenantBalance> out;
  RETURN_IF_ERROR(core_->Write([&](ClusterState& s) -> absl::Status {
    ASSIGN_OR_RETURN(out.first, s.billing().AddCredit(tenant, amount_micros, note));
    out.second = ClusterBilling::Balances(s, tenant).at(0);
    return absl::OkStatus();
  }));
  return out;
}

std::vector<billing::Price> CoreBilling::Prices() const {
  std::vector<billing::Price> out;
  core_->Read([&](const ClusterState& s) { out = ClusterBilling::Prices(s); });
  return out;
}

std::vector<billing::Plan> CoreBilling::Plans() const {
  std::vector<billing::Plan> out;
  core_->Read([&](const ClusterState& s) { out = ClusterBilling::Plans(s); });
  return out;
}

absl::StatusOr<billing::Bill> CoreBilling::Bill(const std::string& tenant,
                                                const std::string& month) const {
  absl::StatusOr<billing::Bill> out = absl::UnknownError("not read");
  core_->Read([&](const ClusterState& s) {
    out = ClusterBilling::Bill(s, tenant, month);
  });
  return out;
}

std::vector<billing::TenantBalance> CoreBilling::Balances(const std::string& tenant) const {
  std::vector<billing::TenantBalance> out;
  core_->Read([&](const ClusterState& s) { out = ClusterBilling::Balances(s, tenant); });
  return out;
}

std::vector<billing::LedgerEntry> CoreBilling::Ledger(const std::string& tenant) const {
  std::vector<billing::LedgerEntry> out;
  core_->Read([&](const ClusterState& s) {
    for (const billing::LedgerEntry& e : ClusterBilling::LedgerOf(s).entries()) {
      if (tenant.empty() || e.tenant() == tenant) out.push_back(e);
    }
  });
  return out;
}

}  // namespace athanor::coord
