// Bills and balances, read from the ledger: a tenant's month as line items
// (per job, attempt, GPU model and price), the allowance used, the balance
// and a daily spend series for the dashboard's chart; and the entries that
// grant a plan's monthly allowance.
//
// Pure functions over the ledger, the price book and the plan.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coordinator/billing/ledger.h"
#include "coordinator/billing/price_book.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

// Where a tenant stands: "ok", "low" (at or below the plan's warning level),
// "very low" (10% of its last funding left), "out of credit" (nothing left).
// A tenant without a plan is billed but never limited: always "ok".
enum class CreditLevel { kOk = 0, kLow = 1, kVeryLow = 2, kOut = 3 };
const char* CreditLevelName(CreditLevel level);

// Balance plus the plan's credit limit.
int64_t Available(const Ledger& ledger, const billing::Plan* plan, const std::string& tenant);
CreditLevel LevelOf(const Ledger& ledger, const billing::Plan* plan, const std::string& tenant);
billing::TenantBalance BalanceOf(const Ledger& ledger, const billing::Plan* plan,
                                 const std::string& tenant);

// The entries that open the allowance of `now_ms`'s month for `plan`'s
// tenant: first an EXPIRY of each earlier month's grant not yet expired (its
// unused rest), then the month's GRANT. Empty when the plan grants nothing
// or the month's grant is already in the ledger. Not appended: the caller
// appends them in order.
std::vector<billing::LedgerEntry> AllowanceEntries(const Ledger& ledger, const billing::Plan& plan,
                                                   int64_t now_ms);

// `month` "YYYY-MM" (the caller validated it). `job_name` names a job id
// (empty when unknown).
billing::Bill MakeBill(const Ledger& ledger, const PriceBook& book, const billing::Plan* plan,
                       const std::string& tenant, const std::string& month,
                       const std::function<std::string(const std::string&)>& job_name);

}  // namespace athanor::coord
