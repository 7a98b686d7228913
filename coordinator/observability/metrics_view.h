// ClusterViewBuilder: the read model every view of the cluster shows
// (`athanor top`, the dashboard's /api/cluster, the gauges of /metrics),
// built from ClusterState and TelemetryStore as one rpc::ClusterView.
//
// The view is a generated message on purpose: it is published once and
// served three ways (gRPC, JSON, Prometheus text) with no second copy of the
// data. Building it reads the state, so it runs on the scheduler thread
// under the state lock (CoreObserver::AfterPass), at most every
// `min_interval`; readers take only a pointer copy under a small mutex that
// nothing else holds, so a scrape never waits for the scheduler.
//
// Thread-safe. The TelemetryStore is not owned.
#pragma once

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/lifecycle_counters.h"
#include "coordinator/observability/telemetry_store.h"
#include "proto/athanor.pb.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

// Builds the view now (under the caller's state lock). Jobs: every active
// and pending one (the first 20 pending get their `why`) and the newest 50
// finished ones.
rpc::ClusterView BuildClusterView(const ClusterState& state, const TelemetryStore& telemetry,
                                  int64_t now_ms);

class ViewPublisher {
 public:
  struct Published {
    rpc::ClusterView view;
    LifecycleCounters counters;
    // Every tenant with a plan or a ledger entry (TenantBilling::Balances:
    // the ledger keeps the sums, so this costs a few map reads per tenant).
    std::vector<billing::TenantBalance> balances;
  };
  void Publish(std::shared_ptr<const Published> p) {
    absl::MutexLock lock(&mu_);
    latest_ = std::move(p);
  }
  // Never null: an empty view before the first pass.
  std::shared_ptr<const Published> Latest() const {
    absl::MutexLock lock(&mu_);
    return latest_;
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Published> latest_ ABSL_GUARDED_BY(mu_) = std::make_shared<Published>();
};

}  // namespace athanor::coord
