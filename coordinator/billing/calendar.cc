#include "coordinator/billing/calendar.h"

#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace athanor::coord {

namespace {

struct tm Utc(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  return tm;
}

int64_t StartOf(int year, int month0) {  // month0: 0..11, may be 12
  struct tm tm = {};
  tm.tm_year = year - 1900 + month0 / 12;
  tm.tm_mon = month0 % 12;
  tm.tm_mday = 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

}  // namespace

std::string MonthOf(int64_t unix_ms) {
  struct tm tm = Utc(unix_ms);
  return absl::StrFormat("%04d-%02d", tm.tm_year + 1900, tm.tm_mon + 1);
}

std::string DayOf(int64_t unix_ms) {
  struct tm tm = Utc(unix_ms);
  return absl::StrFormat("%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

int64_t MonthStartMs(int64_t unix_ms) {
  struct tm tm = Utc(unix_ms);
  return StartOf(tm.tm_year + 1900, tm.tm_mon);
}

int64_t NextMonthStartMs(int64_t unix_ms) {
  struct tm tm = Utc(unix_ms);
  return StartOf(tm.tm_year + 1900, tm.tm_mon + 1);
}

absl::StatusOr<int64_t> ParseMonth(const std::string& month) {
  int year = 0, mon = 0;
  char tail = 0;
  if (month.size() != 7 || month[4] != '-' ||
      std::sscanf(month.c_str(), "%4d-%2d%c", &year, &mon, &tail) != 2 || year < 1970 ||
      mon < 1 || mon > 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("month \"", month, "\": expected YYYY-MM, e.g. 2026-12"));
  }
  return StartOf(year, mon - 1);
}

}  // namespace athanor::coord
