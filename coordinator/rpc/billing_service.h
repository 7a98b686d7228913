// The Billing gRPC service: prices, plans and credit for admins, bills and
// balances for tenants (docs/operations.md, "Billing"). A thin edge over
// CoreBilling: each handler asks the Authorizer (auth_policy.h) first, bounds
// every string of the request, then calls the core. Who may read what:
//   - prices: everyone with a token (they are public);
//   - a bill or a balance: a user its own tenant's (an empty tenant means
//     its own; another is PermissionDenied naming it), an admin any;
//   - prices', plans' and credit's changes, plans and the ledger: admins.
// Every change is logged with who made it.
//
// Thread-safe (gRPC calls it from many threads). The core and the
// authorizer are not owned and outlive the service.
#pragma once

#include "coordinator/auth/auth_policy.h"
#include "coordinator/core/core_billing.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class BillingService final : public rpc::Billing::Service {
 public:
  BillingService(CoordinatorCore* core, const Authorizer* auth) : billing_(core), auth_(auth) {}

  grpc::Status SetPrice(grpc::ServerContext* ctx, const rpc::SetPriceRequest* req,
                        rpc::ListPricesResponse* resp) override;
  grpc::Status ListPrices(grpc::ServerContext* ctx, const rpc::ListPricesRequest* req,
                          rpc::ListPricesResponse* resp) override;
  grpc::Status SetPlan(grpc::ServerContext* ctx, const rpc::SetPlanRequest* req,
                       rpc::ListPlansResponse* resp) override;
  grpc::Status ListPlans(grpc::ServerContext* ctx, const rpc::ListPlansRequest* req,
                         rpc::ListPlansResponse* resp) override;
  grpc::Status AddCredit(grpc::ServerContext* ctx, const rpc::AddCreditRequest* req,
                         rpc::AddCreditResponse* resp) override;
  grpc::Status GetBill(grpc::ServerContext* ctx, const rpc::GetBillRequest* req,
                       billing::Bill* resp) override;
  grpc::Status ListBalances(grpc::ServerContext* ctx, const rpc::ListBalancesRequest* req,
                            rpc::ListBalancesResponse* resp) override;
  grpc::Status ListLedger(grpc::ServerContext* ctx, const rpc::ListLedgerRequest* req,
                          rpc::ListLedgerResponse* resp) override;

 private:
  // The tenant a user's read names (`requested`, empty: the caller's own),
  // checked: a valid name the caller may read, or the status to answer.
  absl::StatusOr<std::string> ReadableTenant(const Identity& who, absl::string_view method,
                                           const std::string& requested) const;

  CoreBilling billing_;
  const Authorizer* const auth_;
};

}  // namespace athanor::coord
