// Metering: what holding GPUs costs, and the ledger entries that charge an
// attempt for a span of time.
//
// An attempt is charged per accrual key (its GPUs of one model at one price)
// on the key's running total: the k-th accrual of a key costs
// Cost(total after) - Cost(total before), Cost rounded down to the
// micro-unit. However a span is cut into accruals (every metering interval,
// at release, across restarts), a key's accruals sum to Cost of its whole
// span, to the micro-unit: exactly what an independent recomputation from
// the attempt's span and the price book gives. Spans are cut at price
// changes and at month boundaries, so each accrual has one price and one
// month.
//
// Pure functions; callers hold whatever lock guards the ledger.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/billing/ledger.h"
#include "coordinator/billing/price_book.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

// One attempt's hold of one GPU model: its GPUs and the CPUs and memory it
// requested on those nodes.
struct HeldShare {
  std::string gpu_model;
  int32_t gpus = 0;
  int32_t cpus = 0;
  int64_t memory_mb = 0;
};

struct AttemptHold {
  std::string tenant;
  std::string job_id;
  int32_t attempt = 0;
  std::vector<HeldShare> shares;  // one per GPU model, by model
};

// What holding `share` for `ms` milliseconds costs at `price`, rounded down.
int64_t CostOf(const billing::Price& price, const HeldShare& share, int64_t ms);

// The accruals (amounts <= 0) that charge `hold` for [from_ms, to_ms), given
// what `ledger` already charged; empty when to_ms <= from_ms. `now_ms` stamps
// them. Not appended: the caller appends them in order.
std::vector<billing::LedgerEntry> Accruals(const Ledger& ledger, const PriceBook& book,
                                           const AttemptHold& hold, int64_t from_ms,
                                           int64_t to_ms, int64_t now_ms);

// The refunds that return everything `ledger` charged the attempt: one per
// key that cost anything.
std::vector<billing::LedgerEntry> Refunds(const Ledger& ledger, const std::string& tenant,
                                          const std::string& job_id, int32_t attempt,
                                          const std::string& why, int64_t now_ms);

}  // namespace athanor::coord
