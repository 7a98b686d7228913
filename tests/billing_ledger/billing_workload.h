// The ledger test's workload, drawn from a seed: the jobs (tenants, shapes,
// run times, priorities, failures, cancels, interactive allocations), the
// prices and their changes, and the disruptions (coordinator kills, node
// losses) placed along the run by how many jobs have finished. The same
// seed draws the same workload; what the cluster makes of it depends on
// timing too.
//
// A simulated rank reads its behaviour from its job's env: SIM_RUN_MS (how
// long it runs) and SIM_FAIL_FIRST (rank 0 of attempt 1 exits 1); RankPlan
// turns that into the fleet's SimRankPlan.
//
// Pure functions; no threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/athanor.pb.h"
#include "proto/athanor_billing.pb.h"
#include "testing/coordinator/sim_fleet.h"

namespace athanor::testing {

struct WorkloadShape {
  int jobs = 240;
  std::vector<std::string> tenants;     // jobs spread over them
  std::vector<std::string> gpu_models;  // the fleet's; the last is priced by "*" only
  int gpus_per_node = 4;
};

struct PlannedJob {
  rpc::SubmitJobRequest request;  // with its idempotency key
  int cancel_after = -1;          // cancelled once its client submitted this many more (-1: never)
};

struct Disruption {
  enum class Kind { kKill, kNodeLoss, kPriceChange };
  Kind kind = Kind::kKill;
  int at_finished = 0;   // once this many jobs have finished
  int price_change = 0;  // kPriceChange: index into Workload::price_changes
};

struct Workload {
  std::vector<PlannedJob> jobs;
  std::vector<billing::Price> prices;  // set before any job (effective now)
  // Each set at once, effective a little later than when it is set.
  std::vector<std::vector<billing::Price>> price_changes;
  std::vector<Disruption> disruptions;  // by at_finished
  int kills = 0;
  int node_losses = 0;
};

Workload DrawWorkload(uint64_t seed, const WorkloadShape& shape);

// How a simulated rank behaves, from its job's env (above).
bench::SimRankPlan RankPlan(const rpc::RankSpec& rank);

}  // namespace athanor::testing
