#include "launcher/cli_parse.h"

#include <time.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace athanor::cli {

std::optional<int64_t> ParseDurationSeconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    default: unit = 0; break;
  }
  if (unit != 0) {
    digits.pop_back();
  } else {
    unit = 1;
  }
  int64_t n = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &n) || n < 0 || n > (int64_t{1} << 40)) {
    return std::nullopt;
  }
  return n * unit;
}

std::optional<int64_t> ParseMegabytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::string digits = text;
  int64_t unit = 1;
  char last = text.back();
  if (last == 'B' || last == 'b') {
    digits.pop_back();
    if (digits.empty()) return std::nullopt;
    last = digits.back();
  }
  if (last == 'M' || last == 'm') {
    digits.pop_back();
  } else if (last == 'G' || last == 'g') {
    digits.pop_back();
    unit = 1024;
  } else if (last == 'T' || last == 't') {
    digits.pop_back();
    unit = 1024 * 1024;
  }
  int64_t n = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &n) || n < 0 || n > (int64_t{1} << 40)) {
    return std::nullopt;
  }
  return n * unit;
}

std::optional<int64_t> ParseSince(const std::string& text, int64_t now_unix) {
  if (text.find('\0') != std::string::npos) return std::nullopt;
  if (std::optional<int64_t> d = ParseDurationSeconds(text)) return now_unix - *d;
  struct tm tm = {};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) {
    tm = {};
    end = strptime(text.c_str(), "%Y-%m-%d", &tm);
  }
  if (end == nullptr || !(*end == '\0' || (end[0] == 'Z' && end[1] == '\0'))) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

absl::Status ParseEnvAssignment(const std::string& text, std::map<std::string, std::string>* env) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--env expects K=V, got '", text, "'"));
  }
  const std::string name = text.substr(0, eq);
  bool valid = !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) {
    valid = valid && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat("--env name '", name,
                                                   "' is not a variable name (letters, digits, '_')"));
  }
  if (text.find('\0', eq) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--env value of ", name, " contains a NUL byte"));
  }
  (*env)[name] = text.substr(eq + 1);
  return absl::OkStatus();
}

}  // namespace athanor::cli
