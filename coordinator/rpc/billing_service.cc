#include "coordinator/rpc/billing_service.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/money.h"
#include "coordinator/billing/price_book.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

// "YYYY-MM": the core parses it; longer text is refused before it is read.
constexpr size_t kMonthBytes = 7;

grpc::Status CheckTenant(const std::string& tenant) {
  return ToGrpc(ValidateName("tenant", tenant));
}

}  // namespace

absl::StatusOr<std::string> BillingService::ReadableTenant(const Identity& who,
                                                         absl::string_view method,
                                                         const std::string& requested) const {
  // An admin's own tenant too, when it names none (the request's contract).
  const std::string tenant = requested.empty() ? who.tenant : requested;
  if (tenant.empty()) {
    return absl::InvalidArgumentError("tenant: required (the caller has no tenant of its own)");
  }
  if (absl::Status s = ValidateName("tenant", tenant); !s.ok()) return s;
  if (absl::Status s = auth_->CheckOwner(who, method, {.tenant = tenant}); !s.ok()) {
    ATHANOR_LOG(WARNING) << method << " refused: " << s.message();
    return s;
  }
  return tenant;
}

grpc::Status BillingService::SetPrice(grpc::ServerContext* ctx, const rpc::SetPriceRequest* req,
                                      rpc::ListPricesResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.SetPrice");
  if (!who.ok()) return ToGrpc(who.status());
  const billing::Price& price = req->price();
  if (price.gpu_model() != kDefaultPriceModel) {
    if (grpc::Status s = ToGrpc(ValidateName("gpu_model", price.gpu_model())); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<billing::Price>> prices = billing_.SetPrice(price);
  if (!prices.ok()) return ToGrpc(prices.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": price of " << price.gpu_model() << " set to "
                    << FormatMoney(price.gpu_hour_micros()) << " per GPU-hour from "
                    << (price.effective_unix_ms() == 0 ? std::string("now")
                                                       : absl::StrCat(price.effective_unix_ms(), " ms"));
  for (billing::Price& p : *prices) *resp->add_prices() = std::move(p);
  return grpc::Status::OK;
}

grpc::Status BillingService::ListPrices(grpc::ServerContext* ctx, const rpc::ListPricesRequest*,
                                        rpc::ListPricesResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.ListPrices");
  if (!who.ok()) return ToGrpc(who.status());
  for (billing::Price& p : billing_.Prices()) *resp->add_prices() = std::move(p);
  return grpc::Status::OK;
}

grpc::Status BillingService::SetPlan(grpc::ServerContext* ctx, const rpc::SetPlanRequest* req,
                                     rpc::ListPlansResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.SetPlan");
  if (!who.ok()) return ToGrpc(who.status());
  const billing::Plan& plan = req->plan();
  if (grpc::Status s = CheckTenant(plan.tenant()); !s.ok()) return s;
  absl::StatusOr<std::vector<billing::Plan>> plans = billing_.SetPlan(plan);
  if (!plans.ok()) return ToGrpc(plans.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": plan of " << plan.tenant() << ": allowance "
                    << FormatMoney(plan.monthly_allowance_micros()) << " a month, credit limit "
                    << FormatMoney(plan.credit_limit_micros()) << ", warn at "
                    << FormatMoney(plan.warn_micros()) << ", platform faults "
                    << (plan.free_platform_faults() ? "free" : "charged");
  for (billing::Plan& p : *plans) *resp->add_plans() = std::move(p);
  return grpc::Status::OK;
}

grpc::Status BillingService::ListPlans(grpc::ServerContext* ctx, const rpc::ListPlansRequest*,
                                       rpc::ListPlansResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.ListPlans");
  if (!who.ok()) return ToGrpc(who.status());
  for (billing::Plan& p : billing_.Plans()) *resp->add_plans() = std::move(p);
  return grpc::Status::OK;
}

grpc::Status BillingService::AddCredit(grpc::ServerContext* ctx, const rpc::AddCreditRequest* req,
                                       rpc::AddCreditResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.AddCredit");
  if (!who.ok()) return ToGrpc(who.status());
  if (grpc::Status s = CheckTenant(req->tenant()); !s.ok()) return s;
  // The amount (> 0) and the note's length are the core's to check.
  auto added = billing_.AddCredit(req->tenant(), req->amount_micros(), req->note());
  if (!added.ok()) return ToGrpc(added.status());
  ATHANOR_LOG(INFO) << Who(auth_, ctx) << ": credit of " << FormatMoney(req->amount_micros())
                    << " for " << req->tenant() << " (entry " << added->first.id() << "); balance "
                    << FormatMoney(added->second.balance_micros());
  *resp->mutable_entry() = std::move(added->first);
  *resp->mutable_balance() = std::move(added->second);
  return grpc::Status::OK;
}

grpc::Status BillingService::GetBill(grpc::ServerContext* ctx, const rpc::GetBillRequest* req,
                                     billing::Bill* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.GetBill");
  if (!who.ok()) return ToGrpc(who.status());
  if (req->month().size() > kMonthBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("month: expected YYYY-MM, got ", req->month().size(), " bytes"));
  }
  absl::StatusOr<std::string> tenant = ReadableTenant(*who, "Billing.GetBill", req->tenant());
  if (!tenant.ok()) return ToGrpc(tenant.status());
  absl::StatusOr<billing::Bill> bill = billing_.Bill(*tenant, req->month());
  if (!bill.ok()) return ToGrpc(bill.status());
  *resp = std::move(*bill);
  return grpc::Status::OK;
}

grpc::Status BillingService::ListBalances(grpc::ServerContext* ctx,
                                          const rpc::ListBalancesRequest* req,
                                          rpc::ListBalancesResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.ListBalances");
  if (!who.ok()) return ToGrpc(who.status());
  // An admin naming none reads every tenant's row; a user only ever its own.
  std::string tenant;
  if (!req->tenant().empty() || !SeesEveryTenant(*who)) {
    absl::StatusOr<std::string> checked = ReadableTenant(*who, "Billing.ListBalances", req->tenant());
    if (!checked.ok()) return ToGrpc(checked.status());
    tenant = *checked;
  }
  for (billing::TenantBalance& b : billing_.Balances(tenant)) *resp->add_balances() = std::move(b);
  return grpc::Status::OK;
}

grpc::Status BillingService::ListLedger(grpc::ServerContext* ctx, const rpc::ListLedgerRequest* req,
                                        rpc::ListLedgerResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "Billing.ListLedger");
  if (!who.ok()) return ToGrpc(who.status());
  if (!req->tenant().empty()) {
    if (grpc::Status s = CheckTenant(req->tenant()); !s.ok()) return s;
  }
  for (billing::LedgerEntry& e : billing_.Ledger(req->tenant())) *resp->add_entries() = std::move(e);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
