// Billing in the cluster state, driven by a FakeClock: metering attempts
// from placement to release, the credit levels' notices, the out-of-credit
// stop, hold and release, refunds of platform faults, and metering that
// resumes exactly after a restart from the persisted ledger.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"

namespace athanor::coord {
namespace {

constexpr int64_t kMicrosPerGpuMs = 1;  // 3.60 per GPU-hour

class ClusterBillingTest : public ::testing::Test {
 protected:
  void SetUp() override { Init(); }
  void Init() {
    StateOptions o;
    o.min_run_time = Duration::zero();
    o.kill_after_ms = 1000;
    o.billing_interval = Seconds(10);
    o.heartbeat_timeout = Seconds(30);
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 2;
      n.inventory.gpu_model = "H200";
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
  }
  void PriceAndPlan(int64_t credit, bool free_faults = false) {
    billing::Price p;
    p.set_gpu_model("H200");
    p.set_gpu_hour_micros(3600000 * kMicrosPerGpuMs);
    ASSERT_TRUE(state_->billing().SetPrice(p).ok());
    billing::Plan plan;
    plan.set_tenant("t");
    plan.set_free_platform_faults(free_faults);
    ASSERT_TRUE(state_->billing().SetPlan(plan).ok());
    ASSERT_TRUE(state_->billing().AddCredit("t", credit, "prepaid").ok());
  }
  std::string Submit(int nodes) {
    JobSpec s;
    s.nodes = nodes;
    s.gpus_per_node = 2;
    s.tenant = "t";
    s.command = {"train"};
    s.grace_period_s = 5;
    return state_->SubmitJob(s)->job_id;
  }
  // Every desired rank of `job` reported in `phase`; others keep running.
  void Report(const std::string& job, RankPhase phase) {
    for (const char* node : {"n1", "n2"}) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        if (d.job_id != job) {
          reports.push_back(ReportOf(d));
        } else if (phase == RankPhase::kExited) {  // stopped by its agent
          reports.push_back(ReportOf(d, phase, 0, 15));
          reports.back().signal_from_agent = true;
        } else {
          reports.push_back(ReportOf(d, phase));
        }
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
  }
  void Step(double seconds) {
    clock_.Advance(Seconds(seconds));
    state_->Tick();
  }
  int64_t Balance() { return ClusterBilling::Balances(*state_, "t").at(0).balance_micros(); }
  std::string NoticeOn(const std::string& node) {
    for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) return d.notice;
    return "(no rank)";
  }
  const JobRecord& Job(const std::string& id) { return *state_->jobs().Find(id); }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterBillingTest, RefusesAmountsThatCouldOverflowABalance) {
  EXPECT_EQ(state_->billing().AddCredit("t", kMaxAmountMicros + 1, "").status().message(),
            "credit for t: the amount must be above zero and at most 1000000000.00");
  EXPECT_EQ(state_->billing().AddCredit("t", 0, "").status().message(),
            "credit for t: the amount must be above zero and at most 1000000000.00");
  billing::Plan plan;
  plan.set_tenant("t");
  plan.set_credit_limit_micros(kMaxAmountMicros + 1);
  EXPECT_EQ(state_->billing().SetPlan(plan).message(), "plan of t: amounts of at most 1000000000.00");
  EXPECT_TRUE(ClusterBilling::Balances(*state_).empty());  // nothing was written
}

TEST_F(ClusterBillingTest, ChargesEveryIntervalAndAtReleaseExactly) {
  PriceAndPlan(1000000000);
  const std::string j = Submit(2);  // 4 GPUs
  Report(j, RankPhase::kRunning);
  Step(10);
  EXPECT_EQ(Balance(), 1000000000 - 4 * 10000 * kMicrosPerGpuMs);
  Step(3.5);  // inside the interval: nothing yet
  EXPECT_EQ(Balance(), 1000000000 - 4 * 10000 * kMicrosPerGpuMs);
  ASSERT_TRUE(state_->CancelJob(j).ok());
  Report(j, RankPhase::kExited);
  ASSERT_EQ(Job(j).state, JobState::kCancelled);
  EXPECT_EQ(Balance(), 1000000000 - 4 * 13500 * kMicrosPerGpuMs);
  Step(60);  // released: no more charges
  EXPECT_EQ(Balance(), 1000000000 - 4 * 13500 * kMicrosPerGpuMs);
  absl::StatusOr<billing::Bill> bill = ClusterBilling::Bill(*state_, "t", "");
  ASSERT_TRUE(bill.ok()) << bill.status();
  ASSERT_EQ(bill->lines_size(), 1);
  EXPECT_EQ(bill->lines(0).gpus(), 4);
  EXPECT_EQ(bill->lines(0).seconds(), 13.5);
  EXPECT_EQ(bill->lines(0).amount_micros(), 54000);
  EXPECT_EQ(bill->lines(0).gpu_model(), "H200");
}

TEST_F(ClusterBillingTest, OutOfCreditWarnsStopsHoldsAndResumesAfterATopUp) {
  PriceAndPlan(100000);  // 25 s of 4 GPUs
  const std::string j = Submit(2);
  Report(j, RankPhase::kRunning);
  Step(10);  // 60000 left
  EXPECT_EQ(NoticeOn("n1"), "");
  Step(10);  // 20000 left: 20%
  EXPECT_EQ(NoticeOn("n1"),
            "credit low: tenant t has 0.02 left; its jobs are stopped when it runs out");
  Step(2.5);  // 10000 left: 10%, metered at once now
  EXPECT_EQ(NoticeOn("n2"),
            "credit very low: tenant t has 0.01 left; its jobs are stopped when it runs out");
  Step(2.5);  // 0 left
  EXPECT_EQ(Job(j).state, JobState::kPreempting);
  EXPECT_EQ(Job(j).stop_kill_after_ms, 5000);
  // New work is held, with a why that says so.
  const std::string later = Submit(1);
  absl::StatusOr<WhyResult> why = state_->Why(later);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->reasons,
            (std::vector<std::string>{"held: tenant t is out of credit (0.00 left); jobs start "
                                      "again once an admin adds credit",
                                      "position 1 of 1 in the queue"}));
  Step(1);  // charged while it checkpoints
  Report(j, RankPhase::kExited);
  EXPECT_EQ(Job(j).state, JobState::kPending);
  EXPECT_EQ(Job(j).restarts, 0);
  EXPECT_EQ(Balance(), -4 * 1000);
  Step(30);
  EXPECT_EQ(Job(j).state, JobState::kPending);
  EXPECT_EQ(Job(later).state, JobState::kPending);
  ASSERT_TRUE(state_->billing().AddCredit("t", 1000000, "top-up").ok());
  EXPECT_EQ(Job(j).state, JobState::kStarting);
  EXPECT_EQ(Job(j).attempt, 2);
  EXPECT_EQ(Balance(), 1000000 - 4000);
  // Charged 26 s of 4 GPUs in all, to the micro-unit.
  int64_t charged = 0;
  for (const billing::LedgerEntry& e : ClusterBilling::LedgerOf(*state_).entries()) {
    if (e.kind() == billing::ACCRUAL) charged -= e.amount_micros();
  }
  EXPECT_EQ(charged, 4 * 26000 * kMicrosPerGpuMs);
}

TEST_F(ClusterBillingTest, ALostNodeIsRefundedWhenThePlanSaysSo) {
  PriceAndPlan(1000000, /*free_faults=*/true);
  const std::string j = Submit(1);
  Report(j, RankPhase::kRunning);
  Step(10);
  EXPECT_EQ(Balance(), 1000000 - 20000);
  const std::string node = Job(j).allocation[0].node;
  const std::string other = node == "n1" ? "n2" : "n1";
  // Only the other node keeps beating: the job's node goes DOWN.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(Seconds(10));
    ASSERT_TRUE(state_->agents().Heartbeat(other, state_->log().generation(), {}));
    state_->Tick();
  }
  EXPECT_NE(Job(j).attempt_spans.at(0).end, 0);
  EXPECT_TRUE(Job(j).attempt_spans.at(0).platform_fault);
  EXPECT_EQ(Balance(), 1000000);  // every accrual of the attempt returned
  // A cancel is the tenant's doing: charged.
  const std::string k = Submit(1);
  Report(k, RankPhase::kRunning);
  Step(4);
  ASSERT_TRUE(state_->CancelJob(k).ok());
  Report(k, RankPhase::kExited);
  EXPECT_FALSE(Job(k).attempt_spans.at(0).platform_fault);
  EXPECT_EQ(Balance(), 1000000 - 2 * 4000);
}

TEST_F(ClusterBillingTest, MeteringResumesExactlyFromThePersistedLedger) {
  PriceAndPlan(1000000000);
  const std::string j = Submit(2);
  Report(j, RankPhase::kRunning);
  Step(12.345);
  // Everything persisted so far, as the store would hold it.
  std::vector<JobRecord> jobs;
  for (const auto& [seq, job] : state_->jobs().all()) jobs.push_back(job);
  std::vector<NodeRecord> nodes;
  for (const char* n : {"n1", "n2"}) nodes.push_back(*state_->nodes().Get(n));
  std::vector<billing::Price> prices = ClusterBilling::Prices(*state_);
  std::vector<billing::Plan> plans = ClusterBilling::Plans(*state_);
  std::vector<billing::LedgerEntry> ledger = ClusterBilling::LedgerOf(*state_).entries();
  // A restart 7.5 s later.
  clock_.Advance(Seconds(7.5));
  StateOptions o;
  o.billing_interval = Seconds(10);
  state_ = std::make_unique<ClusterState>(o, &clock_);
  state_->Restore(jobs, nodes);
  ASSERT_TRUE(state_->billing().Restore(prices, plans, ledger).ok());
  EXPECT_EQ(Balance(), 1000000000 - 4 * 12345);
  state_->Tick();  // 7.5 s since the last accrual: not yet
  EXPECT_EQ(Balance(), 1000000000 - 4 * 12345);
  clock_.Advance(Seconds(2.5));
  state_->Tick();
  EXPECT_EQ(Balance(), 1000000000 - 4 * 22345);
}

}  // namespace
}  // namespace athanor::coord
