#include "coordinator/observability/metrics_registry.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "coordinator/observability/metrics_families.h"

namespace athanor::coord {
namespace {

const prometheus::Histogram::BucketBoundaries& FastBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  return *b;
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(TelemetryStore* telemetry, Duration view_interval)
    : telemetry_(telemetry),
      view_interval_(view_interval),
      registry_(std::make_shared<prometheus::Registry>()) {
  pass_seconds_ = &prometheus::BuildHistogram()
                       .Name("athanor_scheduler_pass_seconds")
                       .Help("Duration of one scheduling pass (or tick) of the coordinator.")
                       .Register(*registry_)
                       .Add({}, FastBuckets());
  commit_seconds_ = &prometheus::BuildHistogram()
                         .Name("athanor_store_commit_seconds")
                         .Help("Duration of one state-store transaction (group commit), fsync included.")
                         .Register(*registry_)
                         .Add({}, FastBuckets());
  log_pages_ = &prometheus::BuildGauge()
                    .Name("athanor_store_log_pages")
                    .Help("Pages in the state store's write-ahead log after the newest transaction.")
                    .Register(*registry_)
                    .Add({});
  auto& checkpoints = prometheus::BuildCounter()
                          .Name("athanor_store_checkpoints_total")
                          .Help("Checkpoints of the state store's write-ahead log: by its checkpointer thread, "
                                "or inside a transaction (the pages a pass left, or a log past 16,000 pages).")
                          .Register(*registry_);
  checkpoints_by_checkpointer_ = &checkpoints.Add({{"by", "checkpointer"}});
  checkpoints_in_commits_ = &checkpoints.Add({{"by", "commit"}});
  rpc_seconds_ = &prometheus::BuildHistogram()
                      .Name("athanor_rpc_duration_seconds")
                      .Help("Latency of gRPC calls served, by method and status code (heartbeats include the long-poll hold).")
                      .Register(*registry_);
}

void CoordinatorMetrics::SetLeadership(int64_t term, int64_t led_since_unix, int64_t terms_won) {
  prometheus::BuildGauge()
      .Name("athanor_coordinator_leader_term")
      .Help("The leading coordinator's term on etcd (its leader key's create revision).")
      .Register(*registry_)
      .Add({})
      .Set(static_cast<double>(term));
  prometheus::BuildGauge()
      .Name("athanor_coordinator_leader_since_timestamp_seconds")
      .Help("When this coordinator took the lead (Unix time).")
      .Register(*registry_)
      .Add({})
      .Set(static_cast<double>(led_since_unix));
  prometheus::BuildCounter()
      .Name("athanor_coordinator_leadership_changes_total")
      .Help("Terms ever won on the state's etcd prefix: one per leadership change, kept in etcd across failovers.")
      .Register(*registry_)
      .Add({})
      .Increment(static_cast<double>(terms_won));
}

void CoordinatorMetrics::AfterPass(const ClusterState& state, Duration pass) {
  pass_seconds_->Observe(ToSeconds(pass));
  const TimePoint now = std::chrono::steady_clock::now();
  if (now - last_view_ < std::max(view_interval_, 50 * last_build_)) return;
  auto p = std::make_shared<ViewPublisher::Published>();
  p->view = BuildClusterView(state, *telemetry_, UnixMs());
  p->counters = state.jobs().counters();
  p->balances = ClusterBilling::Balances(state);
  last_view_ = std::chrono::steady_clock::now();
  last_build_ = last_view_ - now;
  views_.Publish(std::move(p));
}

void CoordinatorMetrics::AfterCommit(Duration write, const StoreLog& log) {
  commit_seconds_->Observe(ToSeconds(write));
  log_pages_->Set(log.pages);
  checkpoints_by_checkpointer_->Increment(
      static_cast<double>(log.checkpointer_passes - last_log_.checkpointer_passes));
  checkpoints_in_commits_->Increment(static_cast<double>(log.commit_checkpoints - last_log_.commit_checkpoints));
  last_log_ = log;
}

void CoordinatorMetrics::ObserveRpc(const std::string& method, const std::string& code,
                                    double seconds) {
  rpc_seconds_->Add({{"method", method}, {"code", code}}, FastBuckets()).Observe(seconds);
}

std::string CoordinatorMetrics::Scrape() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::shared_ptr<const ViewPublisher::Published> p = views_.Latest();
  AppendViewFamilies(p->view, p->counters, &families);
  AppendBillingFamilies(p->balances, &families);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace athanor::coord
