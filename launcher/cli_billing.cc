// The `athanor` CLI's billing, over the coordinator's Billing service:
//
//   athanor bill [--tenant T] [--month YYYY-MM] [--json|--csv]
//   athanor balance [--tenant T] [--json]
// a user reads its own tenant's, an admin any tenant's; and the admin groups
//   athanor admin price set GPU_MODEL --per-hour AMOUNT [--cpu-per-hour AMOUNT]
//                           [--memory-gib-per-hour AMOUNT] [--from TIME] [--json]
//   athanor admin price list [--json]
//   athanor admin plan set TENANT [--monthly-allowance AMOUNT] [--credit-limit AMOUNT]
//                          [--warn-at AMOUNT] [--free-platform-faults] [--json]
//   athanor admin plan list [--json]
//   athanor admin credit add TENANT AMOUNT [--note TEXT] [--json]
// (prices are public: `price list` is for users too).
//
// Amounts are in the cluster's currency ("2.50", at most 6 decimals), parsed
// by ParseMoney; a malformed one is a usage error (exit 2) naming the flag.
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "common/money.h"
#include "launcher/cli_admin_tree.h"
#include "launcher/cli_billing_format.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"

namespace athanor::cli {
namespace {

// `text`, given for `what`, as micro-units into *out; false after printing
// ParseMoney's complaint as a usage error of `cmd`.
bool Amount(const std::string& cmd, const std::string& what, const std::string& text,
            int64_t* out) {
  absl::StatusOr<int64_t> micros = ParseMoney(text, what);
  if (!micros.ok()) {
    UsageError(cmd, std::string(micros.status().message()));
    return false;
  }
  *out = *micros;
  return true;
}

// Calls `method` of the Billing service and prints its reply (`json`: as
// JSON, else `human`'s rendering); kExitRpcError after printing a refusal.
template <typename Request, typename Reply>
int CallBilling(const std::string& cmd, const CliContext& ctx,
                grpc::Status (rpc::Billing::Stub::*method)(grpc::ClientContext*, const Request&,
                                                           Reply*),
                const Request& req, bool json, std::string (*human)(const Reply&)) {
  std::unique_ptr<rpc::Billing::Stub> stub = rpc::Billing::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  Reply reply;
  grpc::Status s = ((*stub).*method)(&c, req, &reply);
  if (!s.ok()) return RpcError(cmd, ctx, s);
  std::cout << (json ? ToJson(reply) : human(reply));
  return kExitOk;
}

// ---------------------------------------------------------------- price

const Subcommand kPriceSet{
    "set",
    "GPU_MODEL --per-hour AMOUNT [--cpu-per-hour AMOUNT] [--memory-gib-per-hour AMOUNT] "
    "[--from TIME] [--json]",
    "set what an hour of a GPU model costs, from a time on"};
const Subcommand kPriceList{"list", "[--json]", "list the prices, past and coming"};

int RunPriceSet(CliContext& ctx, const std::vector<std::string>& args) {
  std::string model, per_hour, cpu_per_hour, memory_per_hour, from;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("gpu-model", po::value(&model)->required(),
       "the GPU model as `athanor nodes` shows it, or \"*\" (quoted) for every model without a "
       "price of its own")
      ("per-hour", po::value(&per_hour)->required(), "AMOUNT per GPU-hour held, such as 2.50")
      ("cpu-per-hour", po::value(&cpu_per_hour)->default_value("0"),
       "AMOUNT per CPU-hour a job requests (0: free)")
      ("memory-gib-per-hour", po::value(&memory_per_hour)->default_value("0"),
       "AMOUNT per GiB-hour of memory a job requests (0: free)")
      ("from", po::value(&from),
       "when it takes effect: Unix seconds or a UTC time such as 2026-12-03T10:00:00Z (default: "
       "now; never in the past, so usage already charged is never repriced)")
      ("json", po::bool_switch(&json), "print the ListPricesResponse as JSON");
  po::positional_options_description pos = FirstOperand("gpu-model");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("price", kPriceSet), &cmd, &pos); rc >= 0) return rc;
  rpc::SetPriceRequest req;
  billing::Price* price = req.mutable_price();
  price->set_gpu_model(model);
  int64_t micros = 0;
  if (!Amount(args[0], "--per-hour", per_hour, &micros)) return kExitUsage;
  price->set_gpu_hour_micros(micros);
  if (!Amount(args[0], "--cpu-per-hour", cpu_per_hour, &micros)) return kExitUsage;
  price->set_cpu_hour_micros(micros);
  if (!Amount(args[0], "--memory-gib-per-hour", memory_per_hour, &micros)) return kExitUsage;
  price->set_memory_gib_hour_micros(micros);
  if (!from.empty()) {
    std::optional<int64_t> t = ParseUnixTime(from);
    if (!t || *t <= 0) {
      return UsageError(args[0], "--from \"" + from + "\": expected Unix seconds or a UTC time "
                                 "such as 2026-12-03T10:00:00Z");
    }
    price->set_effective_unix_ms(*t * 1000);
  }
  return CallBilling(args[0], ctx, &rpc::Billing::Stub::SetPrice, req, json, &FormatPrices);
}

int RunPriceList(CliContext& ctx, const std::vector<std::string>& args) {
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("json", po::bool_switch(&json), "print the ListPricesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("price", kPriceList), &cmd); rc >= 0) return rc;
  return CallBilling(args[0], ctx, &rpc::Billing::Stub::ListPrices, rpc::ListPricesRequest(), json,
                     &FormatPrices);
}

// ---------------------------------------------------------------- plan

const Subcommand kPlanSet{
    "set",
    "TENANT [--monthly-allowance AMOUNT] [--credit-limit AMOUNT] [--warn-at AMOUNT] "
    "[--free-platform-faults] [--json]",
    "set a tenant's whole plan (an amount left out is 0, a switch off)"};
const Subcommand kPlanList{"list", "[--json]", "list the tenants' plans"};

int RunPlanSet(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, allowance, credit_limit, warn_at;
  bool free_faults = false, json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant)->required(), "the tenant")
      ("monthly-allowance", po::value(&allowance)->default_value("0"),
       "AMOUNT granted on the 1st of each month (UTC); what is unused then expires")
      ("credit-limit", po::value(&credit_limit)->default_value("0"),
       "how far below zero the balance may go before the tenant's jobs are held and stopped")
      ("warn-at", po::value(&warn_at)->default_value("0"),
       "warn the tenant's jobs when what is left falls to AMOUNT (0: 20% of the last top-up)")
      ("free-platform-faults", po::bool_switch(&free_faults),
       "refund attempts the platform ended (a node lost, a hang blamed on a node, a preemption "
       "for a higher priority)")
      ("json", po::bool_switch(&json), "print the ListPlansResponse as JSON");
  po::positional_options_description pos = FirstOperand("tenant");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("plan", kPlanSet), &cmd, &pos); rc >= 0) return rc;
  rpc::SetPlanRequest req;
  billing::Plan* plan = req.mutable_plan();
  plan->set_tenant(tenant);
  int64_t micros = 0;
  if (!Amount(args[0], "--monthly-allowance", allowance, &micros)) return kExitUsage;
  plan->set_monthly_allowance_micros(micros);
  if (!Amount(args[0], "--credit-limit", credit_limit, &micros)) return kExitUsage;
  plan->set_credit_limit_micros(micros);
  if (!Amount(args[0], "--warn-at", warn_at, &micros)) return kExitUsage;
  plan->set_warn_micros(micros);
  plan->set_free_platform_faults(free_faults);
  return CallBilling(args[0], ctx, &rpc::Billing::Stub::SetPlan, req, json, &FormatPlans);
}

int RunPlanList(CliContext& ctx, const std::vector<std::string>& args) {
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("json", po::bool_switch(&json), "print the ListPlansResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("plan", kPlanList), &cmd); rc >= 0) return rc;
  return CallBilling(args[0], ctx, &rpc::Billing::Stub::ListPlans, rpc::ListPlansRequest(), json,
                     &FormatPlans);
}

// ---------------------------------------------------------------- credit

const Subcommand kCreditAdd{"add", "TENANT AMOUNT [--note TEXT] [--json]",
                            "top up a tenant's balance and print the new balance"};

int RunCreditAdd(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, amount, note;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant)->required(), "the tenant")
      ("amount", po::value(&amount)->required(), "AMOUNT to add, above zero, such as 100 or 12.50")
      ("note", po::value(&note), "why, kept in the ledger (at most 512 bytes)")
      ("json", po::bool_switch(&json), "print the AddCreditResponse as JSON");
  po::positional_options_description pos;
  pos.add("tenant", 1).add("amount", 1);
  // The flag parser takes "-5" for an option: a negative AMOUNT is named as one.
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 1 && a[0] == '-' && (absl::ascii_isdigit(a[1]) || a[1] == '.') &&
        args[i - 1] != "--note") {
      return UsageError(args[0], std::string(ParseMoney(a, "AMOUNT").status().message()));
    }
  }
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("credit", kCreditAdd), &cmd, &pos); rc >= 0) return rc;
  rpc::AddCreditRequest req;
  req.set_tenant(tenant);
  int64_t micros = 0;
  if (!Amount(args[0], "AMOUNT", amount, &micros)) return kExitUsage;
  if (micros == 0) return UsageError(args[0], "AMOUNT \"" + amount + "\": must be above zero");
  req.set_amount_micros(micros);
  req.set_note(note);
  return CallBilling(args[0], ctx, &rpc::Billing::Stub::AddCredit, req, json, &FormatCredit);
}

}  // namespace

const std::vector<AdminGroup>& BillingAdminGroups() {
  static const std::vector<AdminGroup>* groups = new std::vector<AdminGroup>{
      {{"price", "set|ls", "GPU-hour prices by GPU model"},
       "Prices per GPU-hour (and per requested CPU- and GiB-hour) by GPU model, each in force\n"
       "from its time until the next one of the model; \"*\" prices the models without one.",
       {{kPriceSet, RunPriceSet}, {kPriceList, RunPriceList}}},
      {{"plan", "set|ls", "tenants' allowances, credit limits and warnings"},
       "Tenants' plans: a monthly allowance, a credit limit, when to warn, and whether attempts\n"
       "the platform ended are refunded. A tenant out of credit has its jobs held and stopped;\n"
       "a tenant without a plan is billed but never limited.",
       {{kPlanSet, RunPlanSet}, {kPlanList, RunPlanList}}},
      {{"credit", "add", "top-ups of tenants' balances"},
       "Top-ups of tenants' balances, written to the ledger with an optional note.",
       {{kCreditAdd, RunCreditAdd}}},
  };
  return *groups;
}

int RunBill(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, month;
  bool json = false, csv = false;
  po::options_description desc("athanor bill options");
  desc.add_options()
      ("tenant", po::value(&tenant), "the tenant (default: your own; another is for admins)")
      ("month", po::value(&month), "YYYY-MM, in UTC (default: this month)")
      ("json", po::bool_switch(&json), "print the Bill as JSON")
      ("csv", po::bool_switch(&csv), "print the line items as CSV, with a header row");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor bill [--tenant T] [--month YYYY-MM] [--json|--csv]\n"
                          "A tenant's bill for a month: what each job's attempts were charged, by "
                          "GPU model and\nprice (refunded attempts marked), then the month's "
                          "charges, credit and allowance,\nthe balance, what is available to spend "
                          "and the credit status. Amounts are in the\ncluster's currency.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  if (json && csv) return UsageError("bill", "--json and --csv: choose one");
  if (!month.empty()) {
    if (absl::Status s = CheckMonth(month, "--month"); !s.ok()) {
      return UsageError("bill", std::string(s.message()));
    }
  }
  rpc::GetBillRequest req;
  req.set_tenant(tenant);
  req.set_month(month);
  return CallBilling("bill", ctx, &rpc::Billing::Stub::GetBill, req, json,
                     csv ? &FormatBillCsv : &FormatBill);
}

int RunBalance(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant;
  bool json = false;
  po::options_description desc("athanor balance options");
  desc.add_options()
      ("tenant", po::value(&tenant), "only this tenant (a user: only its own)")
      ("json", po::bool_switch(&json), "print the ListBalancesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc,
                          "usage: athanor balance [--tenant T] [--json]\n"
                          "What tenants have left: the balance (credit and allowances less "
                          "charges), what is\navailable (the balance plus the plan's credit "
                          "limit), what was spent, ever, and the\ncredit status (ok, low, very "
                          "low, out of credit). A user sees its own tenant; an\nadmin every "
                          "tenant with a plan or a ledger entry.",
                          &cmd);
      rc >= 0) {
    return rc;
  }
  rpc::ListBalancesRequest req;
  req.set_tenant(tenant);
  return CallBilling("balance", ctx, &rpc::Billing::Stub::ListBalances, req, json, &FormatBalances);
}

}  // namespace athanor::cli
