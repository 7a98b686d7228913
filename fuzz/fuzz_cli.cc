// Fuzzes the `athanor` CLI's value parsers: each input line is tried as an
// --env assignment, a duration, a size, a --since time, a --from time, a
// month and an amount of money (which must print back to the same value).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "common/money.h"
#include "launcher/cli_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(absl::string_view(reinterpret_cast<const char*>(data), size), '\n')) {
    std::string text(line);
    if (athanor::cli::ParseEnvAssignment(text, &env).ok() && env.empty()) __builtin_trap();
    if (auto d = athanor::cli::ParseDurationSeconds(text); d && *d < 0) __builtin_trap();
    if (auto m = athanor::cli::ParseMegabytes(text); m && *m < 0) __builtin_trap();
    (void)athanor::cli::ParseSince(text, 1767225600);
    (void)athanor::cli::ParseUnixTime(text);
    (void)athanor::cli::CheckMonth(text, "--month");
    if (auto micros = athanor::ParseMoney(text, "AMOUNT", true); micros.ok()) {
      auto again = athanor::ParseMoney(athanor::FormatMoney(*micros), "AMOUNT", true);
      if (!again.ok() || *again != *micros) __builtin_trap();
    }
  }
  return 0;
}
