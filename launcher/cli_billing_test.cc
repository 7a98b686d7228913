#include <gtest/gtest.h>

#include "launcher/cli_billing_format.h"
#include "launcher/cli_parse.h"

namespace athanor::cli {
namespace {

billing::Bill TwoLineBill() {
  billing::Bill bill;
  bill.set_tenant("acme");
  bill.set_month("2026-12");
  billing::BillLine* train = bill.add_lines();
  train->set_job_id("7");
  train->set_job_name("train");
  train->set_attempt(1);
  train->set_gpu_model("H100");
  train->set_gpus(8);
  train->set_seconds(3600);
  train->set_gpu_hour_micros(2500000);
  train->set_amount_micros(20000000);
  billing::BillLine* eval = bill.add_lines();
  eval->set_job_id("8");
  eval->set_job_name("eval, fast");
  eval->set_attempt(2);
  eval->set_gpus(1);  // a node that reports no GPU model
  eval->set_seconds(90.5);
  eval->set_gpu_hour_micros(2500000);
  eval->set_amount_micros(0);
  eval->set_refunded(true);
  bill.set_charged_micros(20000000);
  bill.set_credited_micros(100000000);
  bill.set_allowance_micros(50000000);
  bill.set_allowance_left_micros(30000000);
  bill.set_balance_micros(130000000);
  bill.set_available_micros(180000000);
  bill.set_status("ok");
  return bill;
}

TEST(CliBillingTest, BillListsLinesThenTotals) {
  EXPECT_EQ(FormatBill(TwoLineBill()),
            "bill of acme for 2026-12\n"
            "JOB  NAME        ATTEMPT  GPU-MODEL  GPUS  SECONDS  PER GPU-HOUR  AMOUNT\n"
            "7    train       1        H100       8     3600.0   2.50          20.00\n"
            "8    eval, fast  2        -          1     90.5     2.50          0.00    refunded\n"
            "\n"
            "charged:         20.00\n"
            "credited:        100.00\n"
            "allowance:       50.00\n"
            "allowance left:  30.00\n"
            "balance:         130.00\n"
            "available:       180.00\n"
            "status:          ok\n");
}

TEST(CliBillingTest, BillWithoutUsageSaysSo) {
  billing::Bill bill;
  bill.set_tenant("acme");
  bill.set_month("2026-11");
  bill.set_balance_micros(-1);
  bill.set_status("out of credit");
  EXPECT_EQ(FormatBill(bill),
            "bill of acme for 2026-11\n"
            "no GPU time charged\n"
            "\n"
            "charged:         0.00\n"
            "credited:        0.00\n"
            "allowance:       0.00\n"
            "allowance left:  0.00\n"
            "balance:         -0.000001\n"
            "available:       0.00\n"
            "status:          out of credit\n");
}

TEST(CliBillingTest, CsvQuotesAndDefusesTenantsText) {
  billing::Bill bill = TwoLineBill();
  EXPECT_EQ(FormatBillCsv(bill),
            "job_id,job_name,attempt,gpu_model,gpus,seconds,gpu_hour_price,amount,refunded\n"
            "7,train,1,H100,8,3600.000,2.50,20.00,false\n"
            "8,\"eval, fast\",2,,1,90.500,2.50,0.00,true\n");
  // A name a spreadsheet would run as a formula, a quote, a newline.
  bill.mutable_lines(0)->set_job_name("=HYPERLINK(\"x\")");
  bill.mutable_lines(1)->set_job_name("a\nb");
  EXPECT_EQ(FormatBillCsv(bill),
            "job_id,job_name,attempt,gpu_model,gpus,seconds,gpu_hour_price,amount,refunded\n"
            "7,\"'=HYPERLINK(\"\"x\"\")\",1,H100,8,3600.000,2.50,20.00,false\n"
            "8,a\\x0ab,2,,1,90.500,2.50,0.00,true\n");
  EXPECT_EQ(FormatBillCsv(billing::Bill()),
            "job_id,job_name,attempt,gpu_model,gpus,seconds,gpu_hour_price,amount,refunded\n");
}

TEST(CliBillingTest, Balances) {
  rpc::ListBalancesResponse resp;
  billing::TenantBalance* acme = resp.add_balances();
  acme->set_tenant("acme");
  acme->set_balance_micros(-2200000);
  acme->set_available_micros(47800000);
  acme->set_spent_micros(7200000);
  acme->set_status("ok");
  billing::TenantBalance* beta = resp.add_balances();
  beta->set_tenant("beta");
  beta->set_status("out of credit");
  EXPECT_EQ(FormatBalances(resp),
            "TENANT  BALANCE  AVAILABLE  SPENT  STATUS\n"
            "acme    -2.20    47.80      7.20   ok\n"
            "beta    0.00     0.00       0.00   out of credit\n");
}

TEST(CliBillingTest, PricesPlansAndCredit) {
  rpc::ListPricesResponse prices;
  billing::Price* any = prices.add_prices();
  any->set_gpu_model("*");
  any->set_effective_unix_ms(1796292000000);  // 2026-12-03T10:00:00Z
  any->set_gpu_hour_micros(2500000);
  any->set_cpu_hour_micros(10000);
  any->set_memory_gib_hour_micros(1);
  any->set_set_unix_ms(1796288400999);
  billing::Price* h100 = prices.add_prices();
  h100->set_gpu_model("H100");
  h100->set_effective_unix_ms(1796292000000);
  h100->set_gpu_hour_micros(4000000);
  h100->set_set_unix_ms(1796288400000);
  EXPECT_EQ(FormatPrices(prices),
            "GPU-MODEL  FROM                  PER GPU-HOUR  PER CPU-HOUR  PER GIB-HOUR  SET\n"
            "*          2026-12-03T10:00:00Z  2.50          0.01          0.000001      2026-12-03T09:00:00Z\n"
            "H100       2026-12-03T10:00:00Z  4.00          0.00          0.00          2026-12-03T09:00:00Z\n");

  rpc::ListPlansResponse plans;
  billing::Plan* acme = plans.add_plans();
  acme->set_tenant("acme");
  acme->set_monthly_allowance_micros(50000000);
  acme->set_credit_limit_micros(10000000);
  acme->set_free_platform_faults(true);
  billing::Plan* beta = plans.add_plans();
  beta->set_tenant("beta");
  beta->set_warn_micros(5000000);
  EXPECT_EQ(FormatPlans(plans),
            "TENANT  MONTHLY ALLOWANCE  CREDIT LIMIT  WARN AT                 PLATFORM FAULTS\n"
            "acme    50.00              10.00         20% of the last top-up  free\n"
            "beta    0.00               0.00          5.00                    charged\n");

  rpc::AddCreditResponse credit;
  credit.mutable_entry()->set_id(3);
  credit.mutable_entry()->set_amount_micros(100000000);
  credit.mutable_balance()->set_tenant("acme");
  credit.mutable_balance()->set_balance_micros(97800000);
  credit.mutable_balance()->set_available_micros(107800000);
  credit.mutable_balance()->set_status("ok");
  EXPECT_EQ(FormatCredit(credit),
            "acme: credit of 100.00 (entry 3); balance 97.80, available 107.80 (ok)\n");
}

TEST(CliBillingTest, TimesAndMonths) {
  EXPECT_EQ(ParseUnixTime("1796292000"), 1796292000);
  EXPECT_EQ(ParseUnixTime("2026-12-03T10:00:00Z"), 1796292000);
  EXPECT_EQ(ParseUnixTime("2026-12-03T10:00:00"), 1796292000);
  EXPECT_EQ(ParseUnixTime("2026-12-03"), 1796256000);
  EXPECT_EQ(ParseUnixTime(""), std::nullopt);
  EXPECT_EQ(ParseUnixTime("-5"), std::nullopt);
  EXPECT_EQ(ParseUnixTime("10m"), std::nullopt);  // a duration is not a time
  EXPECT_EQ(ParseUnixTime("2026-12-03T10:00:00+01:00"), std::nullopt);
  EXPECT_EQ(ParseUnixTime(std::string("2026-12-03\0junk", 15)), std::nullopt);
  EXPECT_EQ(ParseUnixTime("99999999999999999999"), std::nullopt);

  EXPECT_TRUE(CheckMonth("2026-12", "--month").ok());
  EXPECT_TRUE(CheckMonth("2027-01", "--month").ok());
  for (const char* bad : {"2026-13", "2026-00", "2026-1", "26-12", "2026/12", "2026-12-01", ""}) {
    absl::Status s = CheckMonth(bad, "--month");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message(), std::string("--month \"") + bad +
                               "\": expected a month as YYYY-MM, such as 2026-12");
  }
}

}  // namespace
}  // namespace athanor::cli
