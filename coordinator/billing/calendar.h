// Calendar months and days in UTC, for the ledger's monthly allowance and
// the bill (Unix milliseconds in, "YYYY-MM" / "YYYY-MM-DD" out).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::coord {

std::string MonthOf(int64_t unix_ms);  // "2026-12"
std::string DayOf(int64_t unix_ms);    // "2026-12-03"
int64_t MonthStartMs(int64_t unix_ms);  // 00:00 UTC on the 1st of its month
int64_t NextMonthStartMs(int64_t unix_ms);
// "2026-12" -> its first millisecond; InvalidArgument naming the text.
absl::StatusOr<int64_t> ParseMonth(const std::string& month);

}  // namespace athanor::coord
