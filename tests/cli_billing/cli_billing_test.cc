// The billing commands of the `athanor` CLI against a real coordinator
// (secure, no agents: nothing is metered, so every amount is exact). An admin
// sets a price and a plan and adds credit; `balance` and `bill` show exactly
// that; a user of tenant alpha reads its own bill and balance but not beta's,
// and cannot change prices, plans or credit; malformed input is a usage error
// (exit 2) that names what is wrong, and reaches no coordinator.
//
// A hang fails fast: LocalCluster's watchdog (100 s) and ctest's TIMEOUT.
#include <time.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// This month in UTC, as bills name it.
std::string ThisMonth() {
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char buf[16];
  strftime(buf, sizeof(buf), "%Y-%m", &tm);
  return buf;
}

class CliBillingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new LocalCluster();
    cluster_->StartCoordinator();
    alpha_ = new std::string(cluster_->CreateToken("alpha"));
    beta_ = new std::string(cluster_->CreateToken("beta"));
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // `r` was refused with PermissionDenied and `message`: exit 1, nothing on
  // stdout, and on stderr "athanor WHAT: MESSAGE (CODE, coordinator ADDR)",
  // as RpcError prints it.
  static void ExpectDenied(const CliResult& r, const std::string& what, const std::string& message) {
    EXPECT_EQ(r.exit_code, 1) << what;
    EXPECT_EQ(r.out, "") << what;
    EXPECT_EQ(r.err, absl::StrCat("athanor ", what, ": ", message, " (PERMISSION_DENIED, coordinator ",
                                  cluster_->address(), ")\n"));
  }
  // How the coordinator names a user of `token`'s tenant.
  static std::string UserOf(const std::string& tenant, const std::string& token) {
    return absl::StrCat("user ", tenant, " (token ", token.substr(4, 16), ")");
  }

  static LocalCluster* cluster_;
  static std::string* alpha_;
  static std::string* beta_;
};

LocalCluster* CliBillingTest::cluster_ = nullptr;
std::string* CliBillingTest::alpha_ = nullptr;
std::string* CliBillingTest::beta_ = nullptr;

// One test, in order: each step builds on the ledger the last one left.
TEST_F(CliBillingTest, AdminSetsUsersReadTheirOwn) {
  // A default price from a fixed time to come.
  CliResult price = cluster_->Cli(
      {"admin", "price", "set", "*", "--per-hour", "2.50", "--from", "2030-01-01T00:00:00Z", "--json"});
  ASSERT_EQ(price.exit_code, 0) << price.err;
  nlohmann::json prices = nlohmann::json::parse(price.out)["prices"];
  ASSERT_EQ(prices.size(), 1u) << price.out;
  EXPECT_EQ(prices[0]["gpu_model"], "*");
  EXPECT_EQ(prices[0]["effective_unix_ms"], "1893456000000");
  EXPECT_EQ(prices[0]["gpu_hour_micros"], "2500000");
  EXPECT_EQ(prices[0]["cpu_hour_micros"], "0");

  CliResult plan = cluster_->Cli({"admin", "plan", "set", "alpha", "--monthly-allowance", "50",
                                  "--credit-limit", "10", "--warn-at", "5", "--free-platform-faults"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.out,
            "TENANT  MONTHLY ALLOWANCE  CREDIT LIMIT  WARN AT  PLATFORM FAULTS\n"
            "alpha   50.00              10.00         5.00     free\n");

  // The plan granted this month's allowance (entry 1); the credit is entry 2.
  CliResult credit = cluster_->Cli({"admin", "credit", "add", "alpha", "100", "--note", "first top-up"});
  ASSERT_EQ(credit.exit_code, 0) << credit.err;
  EXPECT_EQ(credit.out, "alpha: credit of 100.00 (entry 2); balance 150.00, available 160.00 (ok)\n");
  credit = cluster_->Cli({"admin", "credit", "add", "beta", "7"});
  ASSERT_EQ(credit.exit_code, 0) << credit.err;
  EXPECT_EQ(credit.out, "beta: credit of 7.00 (entry 3); balance 7.00, available 7.00 (ok)\n");

  // The admin sees every tenant.
  const std::string both =
      "{\"balances\":["
      "{\"tenant\":\"alpha\",\"balance_micros\":\"150000000\",\"available_micros\":\"160000000\","
      "\"spent_micros\":\"0\",\"status\":\"ok\"},"
      "{\"tenant\":\"beta\",\"balance_micros\":\"7000000\",\"available_micros\":\"7000000\","
      "\"spent_micros\":\"0\",\"status\":\"ok\"}]}\n";
  CliResult balances = cluster_->Cli({"balance", "--json"});
  ASSERT_EQ(balances.exit_code, 0) << balances.err;
  EXPECT_EQ(balances.out, both);
  balances = cluster_->Cli({"balance"});
  EXPECT_EQ(balances.out,
            "TENANT  BALANCE  AVAILABLE  SPENT  STATUS\n"
            "alpha   150.00   160.00     0.00   ok\n"
            "beta    7.00     7.00       0.00   ok\n");

  // alpha sees its own balance only, and may not name beta's.
  balances = cluster_->CliAs(*alpha_, {"balance", "--json"});
  ASSERT_EQ(balances.exit_code, 0) << balances.err;
  EXPECT_EQ(balances.out,
            "{\"balances\":[{\"tenant\":\"alpha\",\"balance_micros\":\"150000000\","
            "\"available_micros\":\"160000000\",\"spent_micros\":\"0\",\"status\":\"ok\"}]}\n");
  const std::string alpha_user = UserOf("alpha", *alpha_);
  ExpectDenied(cluster_->CliAs(*alpha_, {"balance", "--tenant", "beta"}), "balance",
               "Billing.ListBalances: tenant 'beta' is not the caller's (" + alpha_user + ")");

  // alpha's own bill: a table, CSV, JSON.
  CliResult bill = cluster_->CliAs(*alpha_, {"bill"});
  ASSERT_EQ(bill.exit_code, 0) << bill.err;
  EXPECT_EQ(bill.out, "bill of alpha for " + ThisMonth() +
                          "\n"
                          "no GPU time charged\n"
                          "\n"
                          "charged:         0.00\n"
                          "credited:        100.00\n"
                          "allowance:       50.00\n"
                          "allowance left:  50.00\n"
                          "balance:         150.00\n"
                          "available:       160.00\n"
                          "status:          ok\n");
  bill = cluster_->CliAs(*alpha_, {"bill", "--csv", "--month", ThisMonth()});
  ASSERT_EQ(bill.exit_code, 0) << bill.err;
  EXPECT_EQ(bill.out, "job_id,job_name,attempt,gpu_model,gpus,seconds,gpu_hour_price,amount,refunded\n");
  bill = cluster_->CliAs(*alpha_, {"bill", "--json"});
  ASSERT_EQ(bill.exit_code, 0) << bill.err;
  nlohmann::json json = nlohmann::json::parse(bill.out);
  EXPECT_EQ(json["tenant"], "alpha");
  EXPECT_EQ(json["credited_micros"], "100000000");
  EXPECT_EQ(json["available_micros"], "160000000");

  // ... but not beta's.
  ExpectDenied(cluster_->CliAs(*alpha_, {"bill", "--tenant", "beta"}), "bill",
               "Billing.GetBill: tenant 'beta' is not the caller's (" + alpha_user + ")");
  // The admin reads any tenant's.
  bill = cluster_->Cli({"bill", "--tenant", "beta"});
  ASSERT_EQ(bill.exit_code, 0) << bill.err;
  EXPECT_NE(bill.out.find("\nbalance:         7.00\n"), std::string::npos) << bill.out;

  // Users read prices, never change them, plans or credit.
  CliResult r = cluster_->CliAs(*alpha_, {"admin", "price", "list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["prices"], prices);
  for (const auto& [args, rpc] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"admin", "credit", "add", "alpha", "1000"}, "AddCredit"},
           {{"admin", "price", "set", "*", "--per-hour", "0"}, "SetPrice"},
           {{"admin", "plan", "set", "alpha", "--credit-limit", "1000000"}, "SetPlan"},
           {{"admin", "plan", "list"}, "ListPlans"}}) {
    ExpectDenied(cluster_->CliAs(*alpha_, args), absl::StrCat("admin ", args[1], " ", args[2]),
                 absl::StrCat("Billing.", rpc, " is for admins only; the caller is ", alpha_user));
  }
  // Nothing the refused calls asked for happened.
  EXPECT_EQ(cluster_->Cli({"balance", "--json"}).out, both);
  EXPECT_EQ(cluster_->Cli({"admin", "plan", "list"}).out, plan.out);
  EXPECT_EQ(nlohmann::json::parse(cluster_->Cli({"admin", "price", "list", "--json"}).out)["prices"], prices);
}

TEST_F(CliBillingTest, MalformedInputIsAUsageError) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"admin", "credit", "add", "alpha", "12.3456789"},
       "athanor admin credit add: AMOUNT \"12.3456789\": at most 6 decimals (see --help)\n"},
      {{"admin", "credit", "add", "alpha", "-5"},
       "athanor admin credit add: AMOUNT \"-5\": must not be negative (see --help)\n"},
      {{"admin", "credit", "add", "alpha", "0"},
       "athanor admin credit add: AMOUNT \"0\": must be above zero (see --help)\n"},
      {{"admin", "price", "set", "H100", "--per-hour", "1,50"},
       "athanor admin price set: --per-hour \"1,50\": expected an amount such as 12 or 3.50 (see "
       "--help)\n"},
      {{"admin", "price", "set", "H100", "--per-hour", "1", "--from", "tomorrow"},
       "athanor admin price set: --from \"tomorrow\": expected Unix seconds or a UTC time such as "
       "2026-12-03T10:00:00Z (see --help)\n"},
      {{"admin", "plan", "set", "alpha", "--credit-limit=-1"},
       "athanor admin plan set: --credit-limit \"-1\": must not be negative (see --help)\n"},
      {{"bill", "--month", "2026-13"},
       "athanor bill: --month \"2026-13\": expected a month as YYYY-MM, such as 2026-12 (see "
       "--help)\n"},
      {{"bill", "--json", "--csv"}, "athanor bill: --json and --csv: choose one (see --help)\n"},
      {{"balance", "--bogus"}, "athanor balance: unrecognised option '--bogus' (see --help)\n"},
  };
  const std::string before = cluster_->Cli({"balance", "--json"}).out;
  for (const Case& c : cases) {
    CliResult r = cluster_->Cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[c.args.size() - 1];
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, c.err);
  }
  EXPECT_EQ(cluster_->Cli({"balance", "--json"}).out, before);
}

}  // namespace
}  // namespace athanor::testing
