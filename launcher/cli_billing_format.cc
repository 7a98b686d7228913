#include "launcher/cli_billing_format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/money.h"
#include "launcher/cli_format.h"

namespace athanor::cli {
namespace {

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// Unix milliseconds as FormatUnixTime writes their second.
std::string Millis(int64_t unix_ms) { return FormatUnixTime(unix_ms / 1000); }

// One CSV field of text from tenants (job names, models): no control
// characters, quoted when it holds a comma or a quote, and a leading
// = + - @ defused with a quote so that a spreadsheet never runs it as a
// formula.
std::string CsvText(const std::string& raw) {
  std::string cell = EscapeControls(raw);
  if (!cell.empty() && (cell[0] == '=' || cell[0] == '+' || cell[0] == '-' || cell[0] == '@')) {
    cell = absl::StrCat("'", cell);
  }
  if (cell.find_first_of(",\"") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  return quoted + "\"";
}

}  // namespace

std::string FormatBill(const billing::Bill& bill) {
  std::string out = absl::StrCat("bill of ", EscapeControls(bill.tenant()), " for ",
                                 EscapeControls(bill.month()), "\n");
  if (bill.lines_size() == 0) {
    absl::StrAppend(&out, "no GPU time charged\n");
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"JOB", "NAME", "ATTEMPT", "GPU-MODEL", "GPUS", "SECONDS", "PER GPU-HOUR", "AMOUNT", ""}};
    for (const billing::BillLine& l : bill.lines()) {
      rows.push_back({l.job_id(), OrDash(l.job_name()), absl::StrCat(l.attempt()),
                      OrDash(l.gpu_model()), absl::StrCat(l.gpus()),
                      absl::StrFormat("%.1f", l.seconds()), FormatMoney(l.gpu_hour_micros()),
                      FormatMoney(l.amount_micros()), l.refunded() ? "refunded" : ""});
    }
    absl::StrAppend(&out, FormatTable(rows));
  }
  absl::StrAppend(&out, "\n",
                  FormatTable({{"charged:", FormatMoney(bill.charged_micros())},
                               {"credited:", FormatMoney(bill.credited_micros())},
                               {"allowance:", FormatMoney(bill.allowance_micros())},
                               {"allowance left:", FormatMoney(bill.allowance_left_micros())},
                               {"balance:", FormatMoney(bill.balance_micros())},
                               {"available:", FormatMoney(bill.available_micros())},
                               {"status:", bill.status()}}));
  return out;
}

std::string FormatBillCsv(const billing::Bill& bill) {
  std::string out =
      "job_id,job_name,attempt,gpu_model,gpus,seconds,gpu_hour_price,amount,refunded\n";
  for (const billing::BillLine& l : bill.lines()) {
    absl::StrAppend(&out,
                    absl::StrJoin({CsvText(l.job_id()), CsvText(l.job_name()),
                                   absl::StrCat(l.attempt()), CsvText(l.gpu_model()),
                                   absl::StrCat(l.gpus()), absl::StrFormat("%.3f", l.seconds()),
                                   FormatMoney(l.gpu_hour_micros()), FormatMoney(l.amount_micros()),
                                   std::string(l.refunded() ? "true" : "false")},
                                  ","),
                    "\n");
  }
  return out;
}

std::string FormatBalances(const rpc::ListBalancesResponse& balances) {
  std::vector<std::vector<std::string>> rows = {
      {"TENANT", "BALANCE", "AVAILABLE", "SPENT", "STATUS"}};
  for (const billing::TenantBalance& b : balances.balances()) {
    rows.push_back({b.tenant(), FormatMoney(b.balance_micros()), FormatMoney(b.available_micros()),
                    FormatMoney(b.spent_micros()), b.status()});
  }
  return FormatTable(rows);
}

std::string FormatPrices(const rpc::ListPricesResponse& prices) {
  std::vector<std::vector<std::string>> rows = {
      {"GPU-MODEL", "FROM", "PER GPU-HOUR", "PER CPU-HOUR", "PER GIB-HOUR", "SET"}};
  for (const billing::Price& p : prices.prices()) {
    rows.push_back({p.gpu_model(), Millis(p.effective_unix_ms()), FormatMoney(p.gpu_hour_micros()),
                    FormatMoney(p.cpu_hour_micros()), FormatMoney(p.memory_gib_hour_micros()),
                    Millis(p.set_unix_ms())});
  }
  return FormatTable(rows);
}

std::string FormatPlans(const rpc::ListPlansResponse& plans) {
  std::vector<std::vector<std::string>> rows = {
      {"TENANT", "MONTHLY ALLOWANCE", "CREDIT LIMIT", "WARN AT", "PLATFORM FAULTS"}};
  for (const billing::Plan& p : plans.plans()) {
    rows.push_back({p.tenant(), FormatMoney(p.monthly_allowance_micros()),
                    FormatMoney(p.credit_limit_micros()),
                    p.warn_micros() == 0 ? "20% of the last top-up" : FormatMoney(p.warn_micros()),
                    p.free_platform_faults() ? "free" : "charged"});
  }
  return FormatTable(rows);
}

std::string FormatCredit(const rpc::AddCreditResponse& credit) {
  const billing::TenantBalance& b = credit.balance();
  return absl::StrCat(EscapeControls(b.tenant()), ": credit of ",
                      FormatMoney(credit.entry().amount_micros()), " (entry ", credit.entry().id(),
                      "); balance ", FormatMoney(b.balance_micros()), ", available ",
                      FormatMoney(b.available_micros()), " (", b.status(), ")\n");
}

}  // namespace athanor::cli
