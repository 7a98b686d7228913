// The dashboard's billing page in Debian's headless Chromium against a live
// secure cluster. An admin prices every GPU model ("*"), gives tenant acme a
// plan (a monthly allowance, a warning level) and credit, and globex credit,
// through the Billing RPCs; a short job of acme's runs on a real agent, so
// acme has spent. Then /billing, as acme, shows exactly ListBalances'
// balance and GetBill's figures as FormatMoney writes them, the low-credit
// banner, the job among the most expensive lines and a drawn chart; as the
// admin, every tenant's spend and a tenant picker; as globex, acme's bill is
// refused (403, from the RPC's authorisation) and globex's page holds none of
// acme's figures. /metrics has each tenant's spend, balance and credit
// level. Screenshots are saved as artifacts (ArtifactDir()).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <memory>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/money.h"
#include "tests/observability/obs_test_util.h"

namespace athanor::testing {
namespace {

constexpr int64_t kUnit = 1000000;  // micro-units

grpc::Status Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return rpc(&ctx);
}

// `tenant`'s row of ListBalances as `stub`'s caller reads it (a default row,
// with a test failure, when the call fails; an empty tenant when absent).
billing::TenantBalance BalanceOf(rpc::Billing::Stub& stub, const std::string& tenant) {
  rpc::ListBalancesResponse resp;
  grpc::Status s = Call([&](grpc::ClientContext* ctx) { return stub.ListBalances(ctx, {}, &resp); });
  EXPECT_TRUE(s.ok()) << "ListBalances: " << s.error_message();
  for (const billing::TenantBalance& b : resp.balances()) {
    if (b.tenant() == tenant) return b;
  }
  return {};
}

// The value the page shows for a fact of the bill (`<dd data-fact="K">`).
std::string Fact(const std::string& dom, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("<dd data-fact=\"" + key + "\"[^>]*>([^<]*)</dd>"))) return "(none)";
  return m[1];
}

// The table row that starts with `head` ("" when there is none).
std::string Row(const std::string& dom, const std::string& head) {
  const size_t at = dom.find(head);
  if (at == std::string::npos) return "";
  return dom.substr(at, dom.find("</tr>", at) - at);
}

// A number attribute of the spend chart's canvas (-1 when absent).
int64_t ChartAttribute(const std::string& dom, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex("id=\"spend-chart\"[^>]*" + name + "=\"(\\d+)\""))) return -1;
  return std::stoll(m[1]);
}

TEST(ObservabilityBillingDashboardTest, TenantSeesItsBalanceSpendAndChartAndNoOtherTenants) {
  LocalCluster cluster(OwnMasterPort());
  cluster.EnableHttp();
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  const std::string token_a = cluster.CreateToken("acme");
  const std::string token_b = cluster.CreateToken("globex");
  ASSERT_FALSE(token_a.empty());
  ASSERT_FALSE(token_b.empty());
  std::unique_ptr<rpc::Billing::Stub> admin_stub = cluster.BillingStubAs(cluster.admin_token());
  rpc::Billing::Stub& admin = *admin_stub;

  // 3,600.00 a GPU-hour: 1.00 a GPU-second, so a 2 s job costs about 2.00.
  rpc::SetPriceRequest price;
  price.mutable_price()->set_gpu_model("*");
  price.mutable_price()->set_gpu_hour_micros(3600 * kUnit);
  rpc::ListPricesResponse prices;
  grpc::Status s = Call([&](grpc::ClientContext* ctx) { return admin.SetPrice(ctx, price, &prices); });
  ASSERT_TRUE(s.ok()) << "SetPrice: " << s.error_message() << "\n" << cluster.CoordinatorLog();
  // acme: 5.00 a month and 20.00 of credit; warned below 24.50, so any spend
  // past 0.50 makes it "low" (and "very low" only at 2.50 left).
  rpc::SetPlanRequest plan;
  plan.mutable_plan()->set_tenant("acme");
  plan.mutable_plan()->set_monthly_allowance_micros(5 * kUnit);
  plan.mutable_plan()->set_warn_micros(24500000);
  rpc::ListPlansResponse plans;
  s = Call([&](grpc::ClientContext* ctx) { return admin.SetPlan(ctx, plan, &plans); });
  ASSERT_TRUE(s.ok()) << "SetPlan: " << s.error_message();
  for (const auto& [tenant, amount] : {std::pair<std::string, int64_t>{"acme", 20 * kUnit}, {"globex", 7 * kUnit}}) {
    rpc::AddCreditRequest credit;
    credit.set_tenant(tenant);
    credit.set_amount_micros(amount);
    credit.set_note("test top-up");
    rpc::AddCreditResponse added;
    s = Call([&](grpc::ClientContext* ctx) { return admin.AddCredit(ctx, credit, &added); });
    ASSERT_TRUE(s.ok()) << "AddCredit " << tenant << ": " << s.error_message();
  }
  // The month's allowance is granted on the coordinator's next tick.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return BalanceOf(admin, "acme").balance_micros() == 25 * kUnit; }))
      << "acme's balance never reached 25.00: " << BalanceOf(admin, "acme").DebugString();

  CliResult sub = cluster.Cli({"submit", "--tenant", "acme", "--name", "billed", "--nodes", "1",
                               "--gpus-per-node", "1", "--", "sleep", "2"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string job = sub.out.substr(0, sub.out.find('\n'));
  CliResult wait = cluster.Cli({"wait", job, "--timeout", "30"});
  ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err << "\n" << cluster.CoordinatorLog();

  // What the page must show: the Billing service's own figures, as acme reads them.
  std::unique_ptr<rpc::Billing::Stub> acme = cluster.BillingStubAs(token_a);
  const billing::TenantBalance balance = BalanceOf(*acme, "acme");
  ASSERT_EQ(balance.tenant(), "acme");
  ASSERT_GE(balance.spent_micros(), 2 * kUnit) << balance.DebugString();  // charged at the release
  EXPECT_EQ(balance.balance_micros(), 25 * kUnit - balance.spent_micros());
  EXPECT_EQ(balance.status(), "low");
  billing::Bill bill;
  s = Call([&](grpc::ClientContext* ctx) { return acme->GetBill(ctx, rpc::GetBillRequest(), &bill); });
  ASSERT_TRUE(s.ok()) << "GetBill: " << s.error_message();
  ASSERT_EQ(bill.lines_size(), 1) << bill.DebugString();
  EXPECT_EQ(bill.lines(0).job_id(), job);
  EXPECT_EQ(bill.charged_micros(), balance.spent_micros());
  const std::string balance_text = FormatMoney(balance.balance_micros());

  // /metrics has the same figures once the next view is published, and
  // promtool accepts the exposition.
  const std::vector<std::string> series = {
      absl::StrCat("athanor_tenant_spend_micros_total{tenant=\"acme\"} ", balance.spent_micros(), "\n"),
      absl::StrCat("athanor_tenant_balance_micros{tenant=\"acme\"} ", balance.balance_micros(), "\n"),
      "athanor_tenant_credit_status{tenant=\"acme\"} 1\n",
      "athanor_tenant_spend_micros_total{tenant=\"globex\"} 0\n",
      absl::StrCat("athanor_tenant_balance_micros{tenant=\"globex\"} ", 7 * kUnit, "\n"),
      "athanor_tenant_credit_status{tenant=\"globex\"} 0\n"};
  HttpResult metrics;
  const bool published = LocalCluster::WaitFor([&] {
    metrics = cluster.HttpGet(cluster.http_address(), "/metrics");
    for (const std::string& line : series) {
      if (metrics.body.find(line) == std::string::npos) return false;
    }
    return true;
  });
  EXPECT_TRUE(published) << "want:\n" << absl::StrJoin(series, "") << "got:\n" << metrics.body;
  std::ofstream(cluster.dir() + "/metrics.txt") << metrics.body;
  CliResult lint = RunTool({"sh", "-c", "promtool check metrics < '" + cluster.dir() + "/metrics.txt'"},
                           cluster.dir() + "/promtool.err");
  EXPECT_EQ(lint.exit_code, 0) << "promtool (Debian package) is required: " << lint.out << lint.err;

  LocalCluster::RearmWatchdog();  // the browser's part: seven runs of Chromium
  const std::string base = cluster.http_base();
  ASSERT_EQ(base.rfind("https://", 0), 0u) << base;
  const std::string page = DumpDom(cluster, base + "/billing#token=" + token_a);
  std::ofstream(ArtifactDir() + "/billing.html") << page;
  ASSERT_NE(page.find("data-loaded=\"1\""), std::string::npos) << "the page's script never rendered:\n" << page;
  EXPECT_EQ(Fact(page, "tenant"), "acme");
  EXPECT_EQ(Fact(page, "balance"), balance_text) << page;
  EXPECT_EQ(Fact(page, "available"), FormatMoney(balance.available_micros()));
  EXPECT_EQ(Fact(page, "allowance"), "5.00");
  EXPECT_EQ(Fact(page, "allowance left"), FormatMoney(bill.allowance_left_micros()));
  EXPECT_EQ(Fact(page, "charged"), FormatMoney(bill.charged_micros()));
  EXPECT_EQ(Fact(page, "status"), "low");
  EXPECT_NE(page.find(absl::StrCat("<div id=\"credit-banner\" class=\"banner banner-low\" data-status=\"low\">",
                                   "Credit is low (acme: ", FormatMoney(balance.available_micros()), " available).</div>")),
            std::string::npos)
      << "no visible low-credit banner:\n" << page;
  EXPECT_NE(page.find(absl::StrCat("<tr data-job=\"", job, "\" data-amount=\"", bill.lines(0).amount_micros(), "\">")),
            std::string::npos)
      << page;
  // The chart: the month's days, summing to what was charged, and drawn (its
  // bars' colour is on the canvas, not only axes).
  std::smatch total;
  ASSERT_TRUE(std::regex_search(page, total, std::regex("id=\"spend-chart\"[^>]*data-total=\"([^\"]*)\""))) << page;
  EXPECT_EQ(total[1], FormatMoney(bill.charged_micros()));
  EXPECT_GE(ChartAttribute(page, "data-days"), 1);
  EXPECT_GT(ChartAttribute(page, "data-painted"), 1000) << "the chart drew nothing";
  EXPECT_GT(ChartAttribute(page, "data-bar-pixels"), 200) << "the chart drew no bar for the day's spend";
  // A user sees no other tenant: no revenue table, no picker.
  EXPECT_NE(page.find("<section id=\"revenue\" hidden=\"\">"), std::string::npos);
  EXPECT_EQ(page.find("globex"), std::string::npos);
  EXPECT_GT(Screenshot(cluster, base + "/billing#token=" + token_a, ArtifactDir() + "/billing.png"), 20000u);

  // The admin: every tenant's spend, acme's bill picked.
  const std::string admin_page = DumpDom(cluster, base + "/billing?tenant=acme#token=" + cluster.admin_token());
  std::ofstream(ArtifactDir() + "/billing-admin.html") << admin_page;
  EXPECT_EQ(Fact(admin_page, "balance"), balance_text);
  EXPECT_NE(admin_page.find("<section id=\"revenue\">"), std::string::npos) << admin_page;
  const std::string acme_row = Row(admin_page, "<tr data-tenant=\"acme\" class=\"chosen\">");
  EXPECT_NE(acme_row.find(absl::StrCat("<td class=\"money spent\">", FormatMoney(balance.spent_micros()), "</td>")),
            std::string::npos)
      << admin_page;
  EXPECT_NE(Row(admin_page, "<tr data-tenant=\"globex\" class=\"\">").find("<td class=\"money spent\">0.00</td>"),
            std::string::npos)
      << admin_page;
  EXPECT_NE(admin_page.find("<option value=\"globex\">globex</option>"), std::string::npos) << admin_page;
  EXPECT_GT(Screenshot(cluster, base + "/billing?tenant=acme#token=" + cluster.admin_token(),
                       ArtifactDir() + "/billing-admin.png"),
            20000u);

  // globex: acme's bill is refused by the RPC's authorisation, as HTTP 403
  // with its message; its balances are its own only.
  HttpResult refused = HttpGetAs(cluster, token_b, "/api/bill?tenant=acme");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_FALSE(refused.body.empty());
  HttpResult own = HttpGetAs(cluster, token_b, "/api/balances");
  ASSERT_EQ(own.status, 200) << own.body;
  nlohmann::json rows = nlohmann::json::parse(own.body, nullptr, false);
  ASSERT_EQ(rows["balances"].size(), 1u) << own.body;
  EXPECT_EQ(rows["balances"][0]["tenant"], "globex");
  const std::string b_page = DumpDom(cluster, base + "/billing#token=" + token_b);
  std::ofstream(ArtifactDir() + "/billing-globex.html") << b_page;
  EXPECT_EQ(Fact(b_page, "tenant"), "globex") << b_page;
  EXPECT_EQ(Fact(b_page, "balance"), "7.00");
  EXPECT_EQ(b_page.find("acme"), std::string::npos) << b_page;
  EXPECT_EQ(b_page.find(">" + balance_text + "<"), std::string::npos) << b_page;
  // Asking for acme's page shows the refusal and none of acme's figures.
  const std::string b_asks = DumpDom(cluster, base + "/billing?tenant=acme#token=" + token_b);
  std::ofstream(ArtifactDir() + "/billing-refused.html") << b_asks;
  EXPECT_NE(b_asks.find("data-error=\"403\""), std::string::npos) << b_asks;
  EXPECT_TRUE(std::regex_search(
      b_asks, std::regex("<p id=\"error\" class=\"log-error\">/api/bill\\?tenant=acme: HTTP 403: [^<]+</p>")))
      << b_asks;
  EXPECT_EQ(Fact(b_asks, "balance"), "(none)");
  EXPECT_NE(b_asks.find("<section class=\"charts bill-part\" hidden=\"\">"), std::string::npos) << b_asks;
  EXPECT_EQ(b_asks.find(">" + balance_text + "<"), std::string::npos) << b_asks;
  EXPECT_GT(Screenshot(cluster, base + "/billing?tenant=acme#token=" + token_b, ArtifactDir() + "/billing-refused.png"),
            10000u);
}

}  // namespace
}  // namespace athanor::testing
