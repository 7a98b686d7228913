// PriceBook: the prices admins set (`athanor admin price set`), each in force
// from its effective time until the next price of the same GPU model. A
// model without a price of its own is charged at the default model "*"'s; a
// model with neither is free. A price takes effect now or later, never in
// the past, so usage already charged is never repriced.
//
// Not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/athanor_billing.pb.h"

namespace athanor::coord {

inline constexpr char kDefaultPriceModel[] = "*";
// The most an hour of one GPU (or CPU, or GiB) may cost: 1,000,000.00. Far
// above any real price, low enough that no charge can overflow.
inline constexpr int64_t kMaxHourMicros = 1000000LL * 1000000;

class PriceBook {
 public:
  // Prices from the store, any order.
  void Restore(std::vector<billing::Price> prices);
  // InvalidArgument for an empty or malformed model, a negative amount or one
  // above kMaxHourMicros, or
  // an effective time before `now_ms` (0 means now_ms). A price of the same
  // model and effective time is replaced.
  absl::Status Set(billing::Price* price, int64_t now_ms);
  // By model, then effective time.
  const std::vector<billing::Price>& all() const { return prices_; }
  // The price in force for `gpu_model` at `t_ms`; null when free.
  const billing::Price* At(const std::string& gpu_model, int64_t t_ms) const;
  // The times in (from_ms, to_ms) at which the price of `gpu_model` may
  // change, ascending.
  std::vector<int64_t> ChangesBetween(const std::string& gpu_model, int64_t from_ms,
                                      int64_t to_ms) const;

 private:
  const billing::Price* Newest(const std::string& model, int64_t t_ms) const;
  std::vector<billing::Price> prices_;  // sorted by (model, effective)
};

}  // namespace athanor::coord
