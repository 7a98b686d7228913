// The gauges and counters of /metrics that come from the published cluster
// view, the job state machine's counters and tenants' balances (see
// metrics_registry.h). Pure: turns values into Prometheus metric families.
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

#include "coordinator/core/lifecycle_counters.h"
#include "proto/athanor.pb.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

void AppendViewFamilies(const rpc::ClusterView& view, const LifecycleCounters& counters,
                        std::vector<prometheus::MetricFamily>* out);

// Per tenant: spend (accruals less refunds, ever; a refund lowers it), the
// balance, and the credit level as a number (0 ok, 1 low, 2 very low, 3 out
// of credit: bill.h's CreditLevel). Nothing when there are no balances.
void AppendBillingFamilies(const std::vector<billing::TenantBalance>& balances,
                           std::vector<prometheus::MetricFamily>* out);

}  // namespace athanor::coord
