// The billing ledger recomputed independently, and compared with the one a
// coordinator wrote. From what the coordinator reports happened (each
// attempt's nodes and span, and whether the platform ended it: GetJob), the
// fleet's GPU models by node, the price book (ListPrices), the tenants'
// plans and the credits added, it derives what the ledger must hold without
// the coordinator's billing code:
//   - per accrual key (job, attempt, GPU model, price), the sum of the
//     accruals: Cost(the key's whole span), to the micro-unit, where
//     Cost(ms) = floor((gpus*gpu_hour*1024 + cpus*cpu_hour*1024
//                       + memory_mb*memory_gib_hour) * ms / (3600000*1024));
//   - per (job, attempt, GPU model), accrual spans that neither overlap nor
//     leave gaps and cover exactly the attempt's span [start, end), each at
//     the price in force over all of it and within one UTC month;
//   - refunds of everything charged to the attempts the platform ended, for
//     tenants whose plan makes platform faults free, and none other;
//   - per tenant, a balance of credits - charges + refunds.
// Times: an attempt's span in ms is llround(unix_seconds * 1000).
//
// Pure functions; no threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/athanor.pb.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::testing {

// What happened, as the coordinator and the test's own records say.
struct BilledWorld {
  std::vector<billing::Price> prices;                // ListPrices
  std::map<std::string, bool> free_platform_faults;  // by tenant, from the plans set
  std::map<std::string, std::string> model_of_node;  // the fleet's GPU models
  std::map<std::string, int64_t> credits;            // by tenant: AddCredit amounts sent
  std::vector<rpc::Job> jobs;                        // GetJob of every job
};

struct LedgerCheck {
  // Figures.
  int attempts = 0;           // with nodes and an end: charged
  int refunded_attempts = 0;  // of them, expected refunded
  int keys = 0;               // accrual keys expected to cost anything or to be written
  int accruals = 0;           // ACCRUAL entries in the ledger
  int refunds = 0;            // REFUND entries in the ledger
  std::map<std::string, int64_t> expected_balance;  // by tenant
  std::map<std::string, int64_t> ledger_balance;    // by tenant: the sum of its entries
  // Each names the entry or attempt and what was expected; empty: the
  // ledger is exact.
  std::vector<std::string> mismatches;

  // The first `n` mismatches, one a line, and how many more there are.
  std::string Listing(size_t n) const;
};

// The price in force for `gpu_model` at `t_ms`: the model's own newest with
// effective <= t_ms, else the default "*"'s; null when free.
const billing::Price* PriceInForce(const std::vector<billing::Price>& prices,
                                   const std::string& gpu_model, int64_t t_ms);

// What holding `gpus` GPUs and the requested `cpus` and `memory_mb` for `ms`
// costs at `price`, rounded down to the micro-unit.
int64_t CostMicros(const billing::Price& price, int64_t gpus, int64_t cpus, int64_t memory_mb,
                   int64_t ms);

LedgerCheck CheckLedger(const BilledWorld& world, const std::vector<billing::LedgerEntry>& ledger);

}  // namespace athanor::testing
