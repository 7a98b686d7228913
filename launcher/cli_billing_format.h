// Human and CSV renderings of the Billing service's messages for the
// `athanor` CLI (bill, balance, admin price|plan|credit). Amounts in the
// cluster's currency through FormatMoney ("3.50"), times in UTC. Every cell
// goes through EscapeControls (cli_format.h). Pure functions; thread-safe.
#pragma once

#include <string>

#include "proto/athanor.pb.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::cli {

// The line items (job, attempt, GPU model and price) as a table, then the
// month's totals as "key: value" lines.
std::string FormatBill(const billing::Bill& bill);
// The line items alone as CSV: a header row, then one row each, fields
// quoted as RFC 4180 says, "\n" line ends, amounts as FormatMoney writes them.
std::string FormatBillCsv(const billing::Bill& bill);
// TENANT/BALANCE/AVAILABLE/SPENT/STATUS.
std::string FormatBalances(const rpc::ListBalancesResponse& balances);
// GPU-MODEL/FROM/PER GPU-HOUR/PER CPU-HOUR/PER GIB-HOUR/SET.
std::string FormatPrices(const rpc::ListPricesResponse& prices);
// TENANT/MONTHLY ALLOWANCE/CREDIT LIMIT/WARN AT/PLATFORM FAULTS.
std::string FormatPlans(const rpc::ListPlansResponse& plans);
// "TENANT: credit of X (entry N); balance B, available A (STATUS)".
std::string FormatCredit(const rpc::AddCreditResponse& credit);

}  // namespace athanor::cli
