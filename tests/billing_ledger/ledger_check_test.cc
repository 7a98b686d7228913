// The ledger check itself: a ledger written by the metering rule passes,
// and each way a ledger can be wrong (a span charged twice, a span lost, a
// micro-unit off, a refund missing or unearned, a price not in force) is
// named.
#include "tests/billing_ledger/ledger_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace athanor::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;  // a Unix ms well inside a month (2023-11-14)

billing::Price MakePrice(const std::string& model, int64_t effective, int64_t gpu_hour) {
  billing::Price p;
  p.set_gpu_model(model);
  p.set_effective_unix_ms(effective);
  p.set_gpu_hour_micros(gpu_hour);
  p.set_cpu_hour_micros(7'001);
  p.set_memory_gib_hour_micros(3'001);
  return p;
}

// Job 1 (tenant t) ran attempt 1 on node n0 (H200) with 3 GPUs, 5 CPUs and
// 1000 MiB, over [kT0, kT0 + 10 s); H200's price changes at kT0 + 4 s.
class LedgerCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_.prices = {MakePrice("H200", kT0 - 1000, 3'217'771),
                     MakePrice("H200", kT0 + 4000, 1'903'337),
                     MakePrice("*", kT0 - 1000, 1'111'119)};
    world_.model_of_node = {{"n0", "H200"}};
    world_.free_platform_faults = {{"t", true}};
    world_.credits = {{"t", 1'000'000}};
    rpc::Job job;
    job.set_id("1");
    job.mutable_spec()->set_tenant("t");
    job.mutable_spec()->set_gpus_per_node(3);
    job.mutable_spec()->set_cpus_per_node(5);
    job.mutable_spec()->set_memory_mb_per_node(1000);
    rpc::AttemptNodes* a = job.add_attempts();
    a->set_attempt(1);
    a->add_nodes("n0");
    a->set_start_unix(static_cast<double>(kT0) / 1000);
    a->set_end_unix(static_cast<double>(kT0 + 10'000) / 1000);
    world_.jobs.push_back(job);
    Credit(1'000'000);
  }

  void Credit(int64_t amount) {
    billing::LedgerEntry e;
    e.set_tenant("t");
    e.set_kind(billing::CREDIT);
    e.set_amount_micros(amount);
    Append(e);
  }
  // An accrual of [from, to) charged as the k-th of its key, after `before` ms.
  void Accrue(int64_t from, int64_t to, const billing::Price& p, int64_t before) {
    billing::LedgerEntry e;
    e.set_tenant("t");
    e.set_kind(billing::ACCRUAL);
    e.set_job_id("1");
    e.set_attempt(1);
    e.set_gpu_model("H200");
    e.set_gpus(3);
    e.set_price_model(p.gpu_model());
    e.set_price_effective_unix_ms(p.effective_unix_ms());
    e.set_span_start_unix_ms(from);
    e.set_span_end_unix_ms(to);
    e.set_amount_micros(CostMicros(p, 3, 5, 1000, before) -
                        CostMicros(p, 3, 5, 1000, before + to - from));
    Append(e);
  }
  void Append(billing::LedgerEntry e) {
    e.set_id(static_cast<int64_t>(ledger_.size()) + 1);
    ledger_.push_back(std::move(e));
  }
  // The attempt charged in three pieces, cut at the price change.
  void ChargeAll() {
    Accrue(kT0, kT0 + 2500, world_.prices[0], 0);
    Accrue(kT0 + 2500, kT0 + 4000, world_.prices[0], 2500);
    Accrue(kT0 + 4000, kT0 + 10'000, world_.prices[1], 0);
  }

  BilledWorld world_;
  std::vector<billing::LedgerEntry> ledger_;
};

TEST_F(LedgerCheckTest, CostIsFlooredOverTheWholeRate) {
  // Half an hour of 2 GPUs, 1 CPU and 1 GiB: 7,210,002 / 2 per hour, where
  // the halves of 7001 and 3001 make a whole micro-unit together.
  billing::Price p = MakePrice("H200", 0, 3'600'000);
  EXPECT_EQ(CostMicros(p, 2, 1, 1024, 1'800'000), 3'605'001);
  EXPECT_EQ(CostMicros(p, 0, 0, 1, 1000), 0);  // 3001/1024 micros an hour: 0 for a second
}

TEST_F(LedgerCheckTest, PriceInForcePrefersTheModelsOwnThenTheDefault) {
  EXPECT_EQ(PriceInForce(world_.prices, "H200", kT0 + 3999)->gpu_hour_micros(), 3'217'771);
  EXPECT_EQ(PriceInForce(world_.prices, "H200", kT0 + 4000)->gpu_hour_micros(), 1'903'337);
  EXPECT_EQ(PriceInForce(world_.prices, "A100", kT0)->gpu_model(), "*");
  EXPECT_EQ(PriceInForce(world_.prices, "A100", kT0 - 1001), nullptr);
}

TEST_F(LedgerCheckTest, ExactLedgerPasses) {
  ChargeAll();
  LedgerCheck c = CheckLedger(world_, ledger_);
  EXPECT_THAT(c.mismatches, ElementsAre());
  EXPECT_EQ(c.attempts, 1);
  EXPECT_EQ(c.keys, 2);
  EXPECT_EQ(c.accruals, 3);
}

TEST_F(LedgerCheckTest, PlatformFaultOfAFreeTenantIsRefunded) {
  world_.jobs[0].mutable_attempts(0)->set_platform_fault(true);
  ChargeAll();
  LedgerCheck c = CheckLedger(world_, ledger_);
  ASSERT_EQ(c.mismatches.size(), 3u);  // two keys unrefunded, and the balance
  EXPECT_THAT(c.mismatches[0], HasSubstr("refunded 0 micros, expected"));
  for (const billing::Price* p : {&world_.prices[0], &world_.prices[1]}) {
    int64_t charged = 0;
    for (const billing::LedgerEntry& e : ledger_) {
      if (e.kind() == billing::ACCRUAL && e.price_effective_unix_ms() == p->effective_unix_ms()) {
        charged += e.amount_micros();
      }
    }
    billing::LedgerEntry r;
    r.set_tenant("t");
    r.set_kind(billing::REFUND);
    r.set_job_id("1");
    r.set_attempt(1);
    r.set_gpu_model("H200");
    r.set_price_model("H200");
    r.set_price_effective_unix_ms(p->effective_unix_ms());
    r.set_amount_micros(-charged);
    Append(r);
  }
  c = CheckLedger(world_, ledger_);
  EXPECT_THAT(c.mismatches, ElementsAre());
  EXPECT_EQ(c.refunded_attempts, 1);
  EXPECT_EQ(c.expected_balance.at("t"), 1'000'000);
}

TEST_F(LedgerCheckTest, SpanChargedTwiceIsNamed) {
  ChargeAll();
  Accrue(kT0 + 2000, kT0 + 2500, world_.prices[0], 4000);
  LedgerCheck c = CheckLedger(world_, ledger_);
  ASSERT_FALSE(c.mismatches.empty());
  EXPECT_THAT(c.mismatches[0], HasSubstr("entry 5"));
  EXPECT_THAT(c.mismatches[0], HasSubstr("charges [1700000002000, 1700000002500) again"));
}

TEST_F(LedgerCheckTest, SpanLostIsNamed) {
  Accrue(kT0, kT0 + 2500, world_.prices[0], 0);
  Accrue(kT0 + 3000, kT0 + 4000, world_.prices[0], 2500);
  Accrue(kT0 + 4000, kT0 + 10'000, world_.prices[1], 0);
  LedgerCheck c = CheckLedger(world_, ledger_);
  ASSERT_FALSE(c.mismatches.empty());
  EXPECT_THAT(c.mismatches[0], HasSubstr("H200 [1700000002500, 1700000003000) is not charged"));
}

TEST_F(LedgerCheckTest, AMicroUnitOffIsNamed) {
  // Each piece charged as if it were its key's first: rounding drifts.
  Accrue(kT0, kT0 + 2501, world_.prices[0], 0);
  Accrue(kT0 + 2501, kT0 + 4000, world_.prices[0], 0);
  Accrue(kT0 + 4000, kT0 + 10'000, world_.prices[1], 0);
  const int64_t exact = -CostMicros(world_.prices[0], 3, 5, 1000, 4000);
  const int64_t drifted = ledger_[1].amount_micros() + ledger_[2].amount_micros();
  ASSERT_NE(exact, drifted) << "choose amounts whose rounding drifts";
  LedgerCheck c = CheckLedger(world_, ledger_);
  ASSERT_EQ(c.mismatches.size(), 2u);  // the key, and the balance
  EXPECT_THAT(c.mismatches[0], HasSubstr(absl::StrCat("sum to ", drifted, " micros; recomputed ",
                                                      exact, " micros for 4000 ms")));
}

TEST_F(LedgerCheckTest, PriceNotInForceIsNamed) {
  Accrue(kT0, kT0 + 10'000, world_.prices[0], 0);
  LedgerCheck c = CheckLedger(world_, ledger_);
  ASSERT_FALSE(c.mismatches.empty());
  EXPECT_THAT(c.mismatches[0], HasSubstr("runs across the price change at 1700000004000 ms"));
}

}  // namespace
}  // namespace athanor::testing
