// Money as the platform counts it: integer micro-units of the cluster's one
// currency (1,000,000 = 1.00), never floating point, so that sums are exact.
// Parsing is for what people type ("3.5", "12", "0.000001"); formatting for
// what they read.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace athanor {

inline constexpr int64_t kMicrosPerUnit = 1000000;

// "3.5" -> 3500000. At most 6 decimals, an optional leading '-' when
// `allow_negative`, nothing else. InvalidArgument naming `what` and the
// text otherwise, or past 9,000,000,000,000 units.
absl::StatusOr<int64_t> ParseMoney(const std::string& text, const std::string& what,
                                   bool allow_negative = false);

// 3500000 -> "3.50"; 1 -> "0.000001": two decimals at least, six at most,
// trailing zeros past the second dropped.
std::string FormatMoney(int64_t micros);

}  // namespace athanor
