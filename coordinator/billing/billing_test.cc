#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/billing/bill.h"
#include "coordinator/billing/calendar.h"
#include "coordinator/billing/ledger.h"
#include "coordinator/billing/meter.h"
#include "coordinator/billing/price_book.h"
#include "gtest/gtest.h"

namespace athanor::coord {
namespace {

constexpr int64_t kHour = 3600 * 1000;
// 2026-12-01T00:00:00Z
constexpr int64_t kDec1 = 1796083200000;

billing::Price PriceOf(const std::string& model, int64_t per_hour, int64_t from_ms) {
  billing::Price p;
  p.set_gpu_model(model);
  p.set_gpu_hour_micros(per_hour);
  p.set_effective_unix_ms(from_ms);
  return p;
}

AttemptHold Hold(const std::string& job, int32_t attempt, std::vector<HeldShare> shares) {
  return AttemptHold{"acme", job, attempt, std::move(shares)};
}

void AppendAll(Ledger* ledger, const std::vector<billing::LedgerEntry>& entries) {
  for (const billing::LedgerEntry& e : entries) ledger->Append(e);
}

TEST(CalendarTest, MonthsAndDaysInUtc) {
  EXPECT_EQ(MonthOf(kDec1), "2026-12");
  EXPECT_EQ(MonthOf(kDec1 - 1), "2026-11");
  EXPECT_EQ(DayOf(kDec1 + 2 * 24 * kHour + 5), "2026-12-03");
  EXPECT_EQ(MonthStartMs(kDec1 + 12345), kDec1);
  EXPECT_EQ(NextMonthStartMs(kDec1), kDec1 + 31LL * 24 * kHour);  // 2027-01-01
  EXPECT_EQ(*ParseMonth("2026-12"), kDec1);
  EXPECT_EQ(ParseMonth("2026-13").status().message(),
            "month \"2026-13\": expected YYYY-MM, e.g. 2026-12");
}

TEST(MeterTest, CostIsRoundedDownOnTheWholeSpan) {
  billing::Price p = PriceOf("H200", 3500000, 0);  // 3.50 per GPU-hour
  p.set_cpu_hour_micros(10000);                    // 0.01 per CPU-hour
  p.set_memory_gib_hour_micros(2048);              // per GiB-hour
  EXPECT_EQ(CostOf(p, {"H200", 8, 0, 0}, kHour), 28000000);
  // 8 GPUs, 16 CPUs, 1536 MiB for 1 ms: (8*3.5e6 + 16*1e4 + 1.5*2048) / 3.6e6 = 7.8217 -> 7.
  EXPECT_EQ(CostOf(p, {"H200", 8, 16, 1536}, 1), 7);
  EXPECT_EQ(CostOf(p, {"H200", 8, 16, 1536}, kHour), 28000000 + 160000 + 3072);
}

TEST(MeterTest, AccrualsCutAnywhereSumToTheWholeSpan) {
  PriceBook book;
  billing::Price p = PriceOf("H200", 3333333, kDec1);
  ASSERT_TRUE(book.Set(&p, kDec1).ok());
  const AttemptHold hold = Hold("7", 1, {{"H200", 3, 0, 0}});
  Ledger ledger;
  // Irregular cuts: 1 ms, 999 ms, 7 s, 13.001 s, ...
  std::vector<int64_t> cuts = {kDec1, kDec1 + 1, kDec1 + 1000, kDec1 + 8000, kDec1 + 21001,
                               kDec1 + 3 * kHour + 17};
  for (size_t i = 1; i < cuts.size(); ++i) {
    AppendAll(&ledger, Accruals(ledger, book, hold, cuts[i - 1], cuts[i], cuts[i]));
  }
  const int64_t whole = CostOf(p, hold.shares[0], cuts.back() - cuts.front());
  EXPECT_EQ(ledger.Balance("acme"), -whole);
  EXPECT_EQ(whole, 30000044);  // 3 GPUs x 3.333333/h x (3 h + 17 ms) = 30.0000442
  EXPECT_EQ(ledger.MeteredUntil("7", 1), cuts.back());
  EXPECT_EQ(ledger.entries().size(), 5u);
}

TEST(MeterTest, APriceChangeAndAMonthEndCutTheSpan) {
  PriceBook book;
  const int64_t start = kDec1 + 30LL * 24 * kHour;  // 2026-12-31T00:00Z
  billing::Price old_price = PriceOf("*", 2000000, start);
  ASSERT_TRUE(book.Set(&old_price, start).ok());
  billing::Price new_price = PriceOf("*", 4000000, start + 12 * kHour);
  ASSERT_TRUE(book.Set(&new_price, start).ok());
  Ledger ledger;
  const AttemptHold hold = Hold("9", 2, {{"A100", 2, 0, 0}});
  AppendAll(&ledger, Accruals(ledger, book, hold, start, start + 36 * kHour, start + 36 * kHour));
  ASSERT_EQ(ledger.entries().size(), 3u);  // 12 h old price, 12 h new to midnight, 12 h in January
  EXPECT_EQ(ledger.entries()[0].amount_micros(), -48000000);
  EXPECT_EQ(ledger.entries()[0].price_model(), "*");
  EXPECT_EQ(ledger.entries()[1].amount_micros(), -96000000);
  EXPECT_EQ(ledger.entries()[2].amount_micros(), -96000000);
  EXPECT_EQ(MonthOf(ledger.entries()[2].span_start_unix_ms()), "2027-01");
  // A model's own price wins over the default.
  billing::Price own = PriceOf("A100", 1000000, start + 36 * kHour);
  ASSERT_TRUE(book.Set(&own, start + 36 * kHour).ok());
  EXPECT_EQ(book.At("A100", start + 37 * kHour)->gpu_hour_micros(), 1000000);
  EXPECT_EQ(book.At("H200", start + 37 * kHour)->gpu_hour_micros(), 4000000);
  EXPECT_EQ(book.At("H200", start - 1), nullptr);
}

TEST(MeterTest, OneAccrualCutWhereItsPriceStaysSumsToTheWholeSpan) {
  // The default's change cuts an A100 span charged at A100's own price: two
  // pieces of one key in one call (tests/billing_ledger found it 1 micro short).
  PriceBook book;
  billing::Price own = PriceOf("A100", 5623305, kDec1);
  own.set_memory_gib_hour_micros(5352);
  ASSERT_TRUE(book.Set(&own, kDec1).ok());
  billing::Price other = PriceOf("*", 2042216, kDec1 + 112);
  ASSERT_TRUE(book.Set(&other, kDec1).ok());
  const AttemptHold hold = Hold("97", 1, {{"A100", 2, 0, 197267}});
  Ledger ledger;
  AppendAll(&ledger, Accruals(ledger, book, hold, kDec1, kDec1 + 370, kDec1 + 370));
  ASSERT_EQ(ledger.entries().size(), 2u);
  EXPECT_EQ(ledger.entries()[1].price_model(), "A100");
  EXPECT_EQ(ledger.entries()[1].amount_micros(), -880);  // 1261 - 381, not 879 - 0
  EXPECT_EQ(ledger.Balance("acme"), -CostOf(own, hold.shares[0], 370));
  EXPECT_EQ(CostOf(own, hold.shares[0], 370), 1261);
}

TEST(PriceBookTest, RefusesThePastAndNegativeAmounts) {
  PriceBook book;
  billing::Price past = PriceOf("H200", 1, kDec1 - 1);
  EXPECT_EQ(book.Set(&past, kDec1).message(),
            "price of H200: takes effect at 1796083199999 ms, in the past (now 1796083200000); "
            "usage already charged is never repriced");
  billing::Price negative = PriceOf("H200", -5, 0);
  EXPECT_EQ(book.Set(&negative, kDec1).message(), "price of H200: amounts must not be negative");
  billing::Price huge = PriceOf("H200", kMaxHourMicros + 1, 0);
  EXPECT_EQ(book.Set(&huge, kDec1).message(), "price of H200: at most 1000000.00 per hour");
  billing::Price now = PriceOf("H200", 5, 0);
  ASSERT_TRUE(book.Set(&now, kDec1).ok());
  EXPECT_EQ(now.effective_unix_ms(), kDec1);
  billing::Price again = PriceOf("H200", 6, kDec1);
  ASSERT_TRUE(book.Set(&again, kDec1).ok());
  ASSERT_EQ(book.all().size(), 1u);
  EXPECT_EQ(book.all()[0].gpu_hour_micros(), 6);
}

TEST(LedgerTest, RefundsReturnExactlyWhatWasCharged) {
  PriceBook book;
  billing::Price p = PriceOf("H200", 1000001, kDec1);
  ASSERT_TRUE(book.Set(&p, kDec1).ok());
  Ledger ledger;
  const AttemptHold hold = Hold("3", 1, {{"H200", 1, 0, 0}, {"L4", 2, 0, 0}});
  AppendAll(&ledger, Accruals(ledger, book, hold, kDec1, kDec1 + 5555, kDec1 + 5555));
  EXPECT_EQ(ledger.Balance("acme"), -1543);  // H200 only: L4 has no price
  EXPECT_EQ(ledger.Spent("acme"), 1543);
  AppendAll(&ledger, Refunds(ledger, "acme", "3", 1, "node n1 lost", kDec1 + 6000));
  EXPECT_EQ(ledger.Balance("acme"), 0);
  EXPECT_EQ(ledger.Spent("acme"), 0);
  EXPECT_EQ(ledger.Spent("nobody"), 0);
  EXPECT_TRUE(ledger.Refunded("3", 1));
  EXPECT_FALSE(ledger.Refunded("3", 2));
  // Restoring the entries gives back the same sums.
  Ledger restored;
  std::vector<billing::LedgerEntry> entries(ledger.entries().rbegin(), ledger.entries().rend());
  ASSERT_TRUE(restored.Restore(entries).ok());
  EXPECT_EQ(restored.MeteredUntil("3", 1), kDec1 + 5555);
  EXPECT_EQ(restored.TotalsOf(KeyOf(ledger.entries()[0])).amount, -1543);
  EXPECT_EQ(restored.Spent("acme"), 0);
  entries.push_back(entries[0]);
  EXPECT_EQ(restored.Restore(entries).message(), "ledger: entry id 3 appears twice");
}

TEST(BillTest, LevelsFollowThePlan) {
  Ledger ledger;
  billing::Plan plan;
  plan.set_tenant("acme");
  billing::LedgerEntry credit;
  credit.set_tenant("acme");
  credit.set_kind(billing::CREDIT);
  credit.set_amount_micros(10000000);
  ledger.Append(credit);
  EXPECT_EQ(LevelOf(ledger, nullptr, "acme"), CreditLevel::kOk);
  EXPECT_EQ(LevelOf(ledger, &plan, "acme"), CreditLevel::kOk);
  billing::LedgerEntry spend;
  spend.set_tenant("acme");
  spend.set_kind(billing::ACCRUAL);
  spend.set_amount_micros(-8000000);  // 2.00 left of 10.00: 20%
  ledger.Append(spend);
  EXPECT_EQ(LevelOf(ledger, &plan, "acme"), CreditLevel::kLow);
  spend.set_amount_micros(-1000000);  // 1.00 left: 10%
  ledger.Append(spend);
  EXPECT_EQ(LevelOf(ledger, &plan, "acme"), CreditLevel::kVeryLow);
  spend.set_amount_micros(-1000000);
  ledger.Append(spend);
  EXPECT_EQ(LevelOf(ledger, &plan, "acme"), CreditLevel::kOut);
  plan.set_credit_limit_micros(5000000);
  EXPECT_EQ(Available(ledger, &plan, "acme"), 5000000);
  EXPECT_EQ(LevelOf(ledger, &plan, "acme"), CreditLevel::kOk);
  EXPECT_EQ(LevelOf(ledger, nullptr, "acme"), CreditLevel::kOk);  // no plan: never limited
}

TEST(BillTest, LinesPerAttemptModelAndPrice) {
  PriceBook book;
  billing::Price p = PriceOf("H200", 3600000, kDec1);
  ASSERT_TRUE(book.Set(&p, kDec1).ok());
  Ledger ledger;
  billing::LedgerEntry grant;
  grant.set_tenant("acme");
  grant.set_kind(billing::GRANT);
  grant.set_amount_micros(5000000);
  grant.set_note("2026-12");
  ledger.Append(grant);
  AppendAll(&ledger, Accruals(ledger, book, Hold("1", 1, {{"H200", 2, 0, 0}}), kDec1,
                              kDec1 + kHour, kDec1 + kHour));
  AppendAll(&ledger, Accruals(ledger, book, Hold("1", 2, {{"H200", 2, 0, 0}}), kDec1 + 2 * kHour,
                              kDec1 + 2 * kHour + 1500, kDec1 + 3 * kHour));
  AppendAll(&ledger, Refunds(ledger, "acme", "1", 2, "node lost", kDec1 + 3 * kHour));
  billing::Bill bill = MakeBill(ledger, book, nullptr, "acme", "2026-12",
                                [](const std::string& id) { return "train-" + id; });
  ASSERT_EQ(bill.lines_size(), 2);
  EXPECT_EQ(bill.lines(0).job_name(), "train-1");
  EXPECT_EQ(bill.lines(0).seconds(), 3600.0);
  EXPECT_EQ(bill.lines(0).amount_micros(), 7200000);
  EXPECT_EQ(bill.lines(0).gpu_hour_micros(), 3600000);
  EXPECT_EQ(bill.lines(1).attempt(), 2);
  EXPECT_EQ(bill.lines(1).amount_micros(), 0);
  EXPECT_TRUE(bill.lines(1).refunded());
  EXPECT_EQ(bill.charged_micros(), 7200000);
  EXPECT_EQ(bill.allowance_micros(), 5000000);
  EXPECT_EQ(bill.allowance_left_micros(), 0);
  EXPECT_EQ(bill.balance_micros(), -2200000);
  // Credit (the grant) is not spend; the refunded attempt is not either.
  EXPECT_EQ(BalanceOf(ledger, nullptr, "acme").spent_micros(), 7200000);
  ASSERT_EQ(bill.daily_size(), 1);
  EXPECT_EQ(bill.daily(0).day(), "2026-12-01");
  EXPECT_EQ(bill.daily(0).amount_micros(), 7200000);
  EXPECT_EQ(MakeBill(ledger, book, nullptr, "acme", "2026-11", {}).lines_size(), 0);
}

}  // namespace
TEST(BillTest, AllowanceGrantsOncePerMonthAndExpiresTheUnusedRest) {
  PriceBook book;
  billing::Price p = PriceOf("*", 1000000, kDec1);  // 1.00 per GPU-hour
  ASSERT_TRUE(book.Set(&p, kDec1).ok());
  billing::Plan plan;
  plan.set_tenant("acme");
  plan.set_monthly_allowance_micros(5000000);
  Ledger ledger;
  AppendAll(&ledger, AllowanceEntries(ledger, plan, kDec1 + 10));
  ASSERT_EQ(ledger.entries().size(), 1u);
  EXPECT_EQ(ledger.entries()[0].kind(), billing::GRANT);
  EXPECT_EQ(ledger.entries()[0].note(), "2026-12");
  EXPECT_EQ(ledger.entries()[0].created_unix_ms(), kDec1 + 10);
  EXPECT_EQ(AllowanceEntries(ledger, plan, kDec1 + 20 * kHour).size(), 0u);  // once a month
  // Two GPU-hours used in December: 3.00 of the grant expires in January.
  AppendAll(&ledger, Accruals(ledger, book, Hold("1", 1, {{"H200", 2, 0, 0}}), kDec1,
                              kDec1 + kHour, kDec1 + kHour));
  const int64_t jan1 = kDec1 + 31LL * 24 * kHour;
  std::vector<billing::LedgerEntry> january = AllowanceEntries(ledger, plan, jan1);
  ASSERT_EQ(january.size(), 2u);
  EXPECT_EQ(january[0].kind(), billing::EXPIRY);
  EXPECT_EQ(january[0].note(), "2026-12");
  EXPECT_EQ(january[0].amount_micros(), -3000000);
  EXPECT_EQ(january[1].kind(), billing::GRANT);
  EXPECT_EQ(january[1].note(), "2027-01");
  EXPECT_EQ(january[1].amount_micros(), 5000000);
  AppendAll(&ledger, january);
  EXPECT_EQ(ledger.Balance("acme"), 5000000);
  // An overspent month expires nothing; a plan without an allowance grants nothing.
  AppendAll(&ledger, Accruals(ledger, book, Hold("2", 1, {{"H200", 7, 0, 0}}), jan1,
                              jan1 + kHour, jan1 + kHour));
  std::vector<billing::LedgerEntry> february =
      AllowanceEntries(ledger, plan, jan1 + 31LL * 24 * kHour);
  ASSERT_EQ(february.size(), 2u);
  EXPECT_EQ(february[0].amount_micros(), 0);
  EXPECT_EQ(february[1].amount_micros(), 5000000);
  plan.set_monthly_allowance_micros(0);
  EXPECT_EQ(AllowanceEntries(ledger, plan, jan1 + 31LL * 24 * kHour).size(), 0u);
}

}  // namespace athanor::coord
