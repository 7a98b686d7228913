// The gauges and counters of /metrics that come from the published cluster
// view and the job state machine's counters (see metrics_registry.h). Pure:
// turns values into Prometheus metric families.
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

#include "coordinator/core/lifecycle_counters.h"
#include "proto/athanor.pb.h"

namespace athanor::coord {

void AppendViewFamilies(const rpc::ClusterView& view, const LifecycleCounters& counters,
                        std::vector<prometheus::MetricFamily>* out);

}  // namespace athanor::coord
