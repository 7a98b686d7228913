// Telemetry history bounds, the cluster view built from a ClusterState, and
// the Prometheus families built from that view and from tenants' balances.
#include <gtest/gtest.h>

#include "coordinator/core/cluster_state.h"
#include "coordinator/observability/metrics_families.h"
#include "coordinator/observability/metrics_registry.h"
#include "coordinator/observability/metrics_view.h"
#include "coordinator/observability/telemetry_store.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace athanor::coord {
namespace {

TelemetryFigures Sample(int64_t step, int64_t unix_ms, int32_t attempt = 1) {
  TelemetryFigures f;
  f.step = step;
  f.loss = 10.0 / static_cast<double>(step + 1);
  f.unix_ms = unix_ms;
  f.attempt = attempt;
  return f;
}

TEST(TelemetryStoreTest, HistoryStaysBoundedAndEvenOverAnyLength) {
  TelemetryStore store;
  for (int64_t step = 0; step < 100000; ++step) store.Add("7", {Sample(step, step * 10)}, step * 10);
  std::vector<TelemetryFigures> h = store.History("7");
  EXPECT_LE(h.size(), TelemetryStore::kMaxPoints);
  EXPECT_GE(h.size(), TelemetryStore::kMaxPoints / 2);
  EXPECT_EQ(h.back().step, 99999);  // the newest is always there
  // Evenly spread: every gap between kept points is the same stride (but the newest's).
  const int64_t stride = h[1].step - h[0].step;
  for (size_t i = 1; i + 1 < h.size(); ++i) EXPECT_EQ(h[i].step - h[i - 1].step, stride) << i;
  EXPECT_LE(h.front().step, stride);
}

TEST(TelemetryStoreTest, PersistsFirstSampleOfAnAttemptThenEveryThirtySeconds) {
  TelemetryStore store;
  EXPECT_TRUE(store.Add("1", {Sample(0, 1000)}, 1000));
  EXPECT_FALSE(store.Add("1", {Sample(1, 2000)}, 2000));
  EXPECT_FALSE(store.Add("1", {Sample(2, 30999)}, 30999));
  EXPECT_TRUE(store.Add("1", {Sample(3, 31000)}, 31000));
  EXPECT_TRUE(store.Add("1", {Sample(0, 32000, 2)}, 32000));  // a new attempt
}

TEST(TelemetryStoreTest, StepRateOverTheRecentWindow) {
  TelemetryStore store;
  for (int64_t i = 0; i <= 40; ++i) store.Add("3", {Sample(i * 5, 100000 + i * 1000)}, 100000 + i * 1000);
  double rate = 0;
  TelemetryFigures latest = store.Latest("3", &rate);
  EXPECT_EQ(latest.step, 200);
  EXPECT_DOUBLE_EQ(rate, 5.0);  // 5 steps a second
  EXPECT_EQ(store.Latest("unknown", &rate).step, -1);
  EXPECT_EQ(rate, 0);
}

// A node of 2 GPUs.
absl::Status AddNode(ClusterState& state, const std::string& name) {
  NodeRecord n;
  n.name = name;
  n.host = name;
  n.agent_address = "127.0.0.1:1";
  n.inventory.gpus = 2;
  n.inventory.gpu_model = "H200";
  return state.agents().Register(n, {});
}

absl::Status Submit(ClusterState& state, const std::string& tenant, int32_t nodes, int32_t gpus_per_node) {
  JobSpec job;
  job.tenant = tenant;
  job.nodes = nodes;
  job.gpus_per_node = gpus_per_node;
  job.command = {"train"};
  return state.SubmitJob(job).status();
}

TEST(ClusterViewTest, ViewAndMetricsShowAllocationQueueAndTelemetry) {
  FakeClock clock;
  StateOptions options;
  ClusterState state(options, &clock);
  for (const char* name : {"n1", "n2"}) ASSERT_TRUE(AddNode(state, name).ok());
  ASSERT_TRUE(Submit(state, "alice", 2, 2).ok());
  ASSERT_TRUE(Submit(state, "bob", 1, 1).ok());
  TelemetryStore telemetry;
  telemetry.Add("1", {Sample(10, 1000), Sample(20, 3000)}, 3000);
  rpc::ClusterView view = BuildClusterView(state, telemetry, 5000);
  ASSERT_EQ(view.nodes_size(), 2);
  for (const rpc::NodeStatus& n : view.nodes()) {
    ASSERT_EQ(n.gpus_size(), 2);
    for (const rpc::GpuSlot& g : n.gpus()) {
      EXPECT_EQ(g.job_id(), "1");
      EXPECT_EQ(g.tenant(), "alice");
      EXPECT_FALSE(g.measured());
    }
  }
  ASSERT_EQ(view.jobs_size(), 2);
  EXPECT_EQ(view.jobs(0).state(), "STARTING");
  EXPECT_EQ(view.jobs(0).last().step(), 20);
  EXPECT_DOUBLE_EQ(view.jobs(0).steps_per_s(), 5.0);
  EXPECT_EQ(view.jobs(1).state(), "PENDING");
  ASSERT_GT(view.jobs(1).why_size(), 0);
  EXPECT_EQ(view.queue_length(), 1);

  std::vector<prometheus::MetricFamily> families;
  AppendViewFamilies(view, state.jobs().counters(), &families);
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  const std::string t = text.str();
  EXPECT_NE(t.find("athanor_queue_length 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_node_gpus_allocated{node=\"n1\",tenant=\"alice\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_tenant_gpus_allocated{tenant=\"alice\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_jobs{state=\"PENDING\",tenant=\"bob\"} 1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_job_pending_seconds_count 1\n"), std::string::npos) << t;
  // Figures only for running jobs: this one is still STARTING.
  EXPECT_EQ(t.find("athanor_job_steps_total{"), std::string::npos) << t;
  // No utilisation series where nothing was measured (absent, not zero).
  EXPECT_EQ(t.find("athanor_node_gpu_utilization_ratio"), std::string::npos) << t;
}

// The store's log: its length after the newest commit, and checkpoints
// counted from the store's running totals, by who ran them.
TEST(CoordinatorMetricsTest, StoreLogPagesAndCheckpointsByWhoRanThem) {
  TelemetryStore telemetry;
  CoordinatorMetrics metrics(&telemetry);
  metrics.AfterCommit(Millis(2), {12, 0, 0});
  metrics.AfterCommit(Millis(30), {1010, 3, 1});
  metrics.AfterCommit(Millis(1), {4, 5, 2});
  const std::string t = metrics.Scrape();
  EXPECT_NE(t.find("athanor_store_log_pages 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_store_checkpoints_total{by=\"checkpointer\"} 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_store_checkpoints_total{by=\"commit\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_store_commit_seconds_count 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_store_commit_seconds_bucket{le=\"0.025\"} 2\n"), std::string::npos) << t;
}

TEST(ClusterViewTest, FlaggedStragglerIsAGaugeWhileItsJobRuns) {
  rpc::ClusterView view;
  rpc::JobStatus* j = view.add_jobs();
  j->set_id("4");
  j->set_tenant("alice");
  j->set_state("RUNNING");
  j->mutable_last()->set_step(-1);  // no telemetry yet: the flag is shown anyway
  rpc::RankFlag* f = j->add_stragglers();
  f->set_rank(1);
  f->set_node("node-b");
  f->set_ratio(1.75);
  rpc::JobStatus* done = view.add_jobs();
  *done = *j;
  done->set_id("5");
  done->set_state("SUCCEEDED");  // a finished job's old flag is not a series
  std::vector<prometheus::MetricFamily> families;
  AppendViewFamilies(view, LifecycleCounters{}, &families);
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  const std::string t = text.str();
  EXPECT_NE(t.find("athanor_job_straggler_ratio{job_id=\"4\",tenant=\"alice\",rank=\"1\",node=\"node-b\"} 1.75\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("athanor_job_straggler_ratio{job_id=\"5\""), std::string::npos) << t;
}

// Spend, balance and credit level per tenant, as the scheduler thread
// publishes them after a pass: 20 s of 2 GPUs at 3.60 a GPU-hour (1 micro a
// GPU-millisecond) cost 0.04; bob has a plan and nothing to spend.
TEST(CoordinatorMetricsTest, TenantsSpendBalanceAndCreditStatus) {
  FakeClock clock;
  StateOptions options;
  options.billing_interval = Seconds(10);
  ClusterState state(options, &clock);
  ASSERT_TRUE(AddNode(state, "n1").ok());
  billing::Price price;
  price.set_gpu_model("*");
  price.set_gpu_hour_micros(3600000);
  ASSERT_TRUE(state.billing().SetPrice(price).ok());
  for (const char* tenant : {"alice", "bob"}) {
    billing::Plan plan;
    plan.set_tenant(tenant);
    plan.set_warn_micros(99990000);
    ASSERT_TRUE(state.billing().SetPlan(plan).ok());
  }
  ASSERT_TRUE(state.billing().AddCredit("alice", 100000000, "prepaid").ok());
  ASSERT_TRUE(Submit(state, "alice", 1, 2).ok());
  for (int i = 0; i < 2; ++i) {
    clock.Advance(Seconds(10));
    state.Tick();
  }
  TelemetryStore telemetry;
  CoordinatorMetrics metrics(&telemetry, Duration::zero());
  metrics.AfterPass(state, Millis(1));
  const std::string t = metrics.Scrape();
  EXPECT_NE(t.find("athanor_tenant_spend_micros_total{tenant=\"alice\"} 40000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_tenant_balance_micros{tenant=\"alice\"} 99960000\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_tenant_credit_status{tenant=\"alice\"} 1\n"), std::string::npos) << t;  // low
  EXPECT_NE(t.find("athanor_tenant_spend_micros_total{tenant=\"bob\"} 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_tenant_balance_micros{tenant=\"bob\"} 0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("athanor_tenant_credit_status{tenant=\"bob\"} 3\n"), std::string::npos) << t;  // out
  // The published rows are the core's own.
  const std::vector<billing::TenantBalance> rows = ClusterBilling::Balances(state);
  ASSERT_EQ(metrics.View()->balances.size(), rows.size());
  EXPECT_EQ(metrics.View()->balances[0].DebugString(), rows[0].DebugString());
}

TEST(CoordinatorMetricsTest, NoBillingFamiliesWithoutBalances) {
  std::vector<prometheus::MetricFamily> families;
  AppendBillingFamilies({}, &families);
  EXPECT_TRUE(families.empty());
  billing::TenantBalance b;
  b.set_tenant("carol");
  b.set_spent_micros(1);
  b.set_balance_micros(-5);
  b.set_status("very low");
  AppendBillingFamilies({b}, &families);
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  EXPECT_NE(text.str().find("athanor_tenant_credit_status{tenant=\"carol\"} 2\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("athanor_tenant_balance_micros{tenant=\"carol\"} -5\n"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace athanor::coord
