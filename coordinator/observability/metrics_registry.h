// CoordinatorMetrics: the coordinator's Prometheus metrics and its published
// cluster view (docs/observability.md lists every metric).
//
// Three kinds of figures, none of which makes a scrape wait for the
// scheduler:
//  - histograms observed where things happen (scheduling pass, store
//    commit, RPC latency): prometheus-cpp objects with their own tiny locks;
//  - gauges of the cluster (jobs, GPUs, queue, training figures), the job
//    state machine's counters and tenants' spend and balances, taken from
//    the view the scheduler thread publishes after a pass (at most every
//    500 ms; see metrics_view.h);
//  - nothing is computed from ClusterState at scrape time.
//
// Thread-safe. The TelemetryStore is not owned and must outlive this.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "coordinator/core/core_observer.h"
#include "coordinator/observability/metrics_view.h"
#include "coordinator/observability/telemetry_store.h"

namespace athanor::coord {

class CoordinatorMetrics final : public CoreObserver {
 public:
  explicit CoordinatorMetrics(TelemetryStore* telemetry,
                              Duration view_interval = Millis(500));

  void AfterPass(const ClusterState& state, Duration pass) override;
  void AfterCommit(Duration write, const StoreLog& log) override;
  // One RPC served: its method (last path segment) and gRPC status name.
  void ObserveRpc(const std::string& method, const std::string& code, double seconds);

  // With the state on etcd, once this process leads: its term, since when,
  // and the terms ever won on the state's prefix (each a leadership change).
  void SetLeadership(int64_t term, int64_t led_since_unix, int64_t terms_won);

  // The Prometheus text exposition of every metric.
  std::string Scrape() const;
  std::shared_ptr<const ViewPublisher::Published> View() const { return views_.Latest(); }
  TelemetryStore* telemetry() const { return telemetry_; }

 private:
  TelemetryStore* const telemetry_;
  const Duration view_interval_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* pass_seconds_;
  prometheus::Histogram* commit_seconds_;
  prometheus::Gauge* log_pages_;
  prometheus::Counter* checkpoints_by_checkpointer_;
  prometheus::Counter* checkpoints_in_commits_;
  StoreLog last_log_;  // committer thread only: the totals already counted
  prometheus::Family<prometheus::Histogram>* rpc_seconds_;
  ViewPublisher views_;
  // Scheduler thread only: when the view was last built and how long that
  // held the state lock; the next waits max(view_interval, 50 x that), so
  // building views takes at most 2% of the scheduler thread at any scale.
  TimePoint last_view_{};
  Duration last_build_{0};
};

}  // namespace athanor::coord
