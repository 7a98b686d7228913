#include "common/money.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace athanor {

namespace {
constexpr int64_t kMaxUnits = 9000000000000;  // 9e12 units: 9e18 micros fits int64
}

absl::StatusOr<int64_t> ParseMoney(const std::string& text, const std::string& what,
                                   bool allow_negative) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", text, "\": ", why));
  };
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    if (!allow_negative) return bad("must not be negative");
    negative = true;
    ++i;
  }
  int64_t units = 0;
  size_t int_digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++int_digits) {
    units = units * 10 + (text[i] - '0');
    if (units > kMaxUnits) return bad("too large");
  }
  int64_t frac = 0;
  size_t frac_digits = 0;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits == 6) return bad("at most 6 decimals");
      frac = frac * 10 + (text[i] - '0');
    }
    if (frac_digits == 0) return bad("expected digits after '.'");
  }
  if (i != text.size() || int_digits + frac_digits == 0) {
    return bad("expected an amount such as 12 or 3.50");
  }
  for (size_t d = frac_digits; d < 6; ++d) frac *= 10;
  const int64_t micros = units * kMicrosPerUnit + frac;
  return negative ? -micros : micros;
}

std::string FormatMoney(int64_t micros) {
  const bool negative = micros < 0;
  // Magnitude without overflow on INT64_MIN.
  const uint64_t m = negative ? ~static_cast<uint64_t>(micros) + 1 : static_cast<uint64_t>(micros);
  std::string frac = std::to_string(m % kMicrosPerUnit);
  frac.insert(0, 6 - frac.size(), '0');
  while (frac.size() > 2 && frac.back() == '0') frac.pop_back();
  return absl::StrCat(negative ? "-" : "", m / kMicrosPerUnit, ".", frac);
}

}  // namespace athanor
