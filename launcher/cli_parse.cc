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

absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text) {
  const size_t colon = text.find(':');
  auto count = [&](const std::string& part) -> std::optional<int32_t> {
    int32_t n = 0;
    if (part.empty() || !absl::SimpleAtoi(part, &n) || n < 1) return std::nullopt;
    return n;
  };
  if (colon == std::string::npos) {
    std::optional<int32_t> n = count(text);
    if (!n) return absl::InvalidArgumentError(absl::StrCat("--nodes: expected N or MIN:MAX (counts >= 1), got '", text, "'"));
    return NodeRange{0, *n};
  }
  std::optional<int32_t> lo = count(text.substr(0, colon)), hi = count(text.substr(colon + 1));
  if (!lo || !hi) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: expected N or MIN:MAX (counts >= 1), got '", text, "'"));
  }
  if (*lo > *hi) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: MIN ", *lo, " is more than MAX ", *hi, " in '", text, "'"));
  }
  return NodeRange{*lo == *hi ? 0 : *lo, *hi};
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

namespace {

// "2026-01-31" or "2026-01-31T12:00:00[Z]", in UTC.
std::optional<int64_t> ParseUtcDate(const std::string& text) {
  if (text.find('\0') != std::string::npos) return std::nullopt;
  struct tm tm = {};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) {
    tm = {};
    end = strptime(text.c_str(), "%Y-%m-%d", &tm);
  }
  if (end == nullptr || !(*end == '\0' || (end[0] == 'Z' && end[1] == '\0'))) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

std::optional<int64_t> ParseSince(const std::string& text, int64_t now_unix) {
  if (std::optional<int64_t> d = ParseDurationSeconds(text)) return now_unix - *d;
  return ParseUtcDate(text);
}

std::optional<int64_t> ParseUnixTime(const std::string& text) {
  int64_t seconds = 0;
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    // Up to the year 9999: its milliseconds still fit an int64.
    if (!absl::SimpleAtoi(text, &seconds) || seconds > int64_t{253402300799}) return std::nullopt;
    return seconds;
  }
  return ParseUtcDate(text);
}

absl::Status CheckMonth(const std::string& text, const std::string& what) {
  const bool digits = text.size() == 7 && text[4] == '-' &&
                      text.substr(0, 4).find_first_not_of("0123456789") == std::string::npos &&
                      text.substr(5).find_first_not_of("0123456789") == std::string::npos;
  if (!digits || text.substr(5) < "01" || text.substr(5) > "12") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\": expected a month as YYYY-MM, such as 2026-12"));
  }
  return absl::OkStatus();
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

absl::StatusOr<VolumeArg> ParseVolumeArg(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--volume expects NAME:/path[:ro], got '", text, "': ", why));
  };
  size_t colon = text.find(':');
  if (colon == std::string::npos) return bad("no ':/path'");
  VolumeArg v;
  v.name = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  if (v.name.empty()) return bad("the volume's name is empty");
  size_t mode = rest.rfind(':');
  if (mode != std::string::npos) {
    std::string word = rest.substr(mode + 1);
    if (word != "ro" && word != "rw") return bad(absl::StrCat("the mode '", word, "' is neither ro nor rw"));
    v.read_only = word == "ro";
    rest = rest.substr(0, mode);
  }
  if (rest.empty() || rest[0] != '/') return bad("the path is not absolute");
  v.path = rest;
  return v;
}

}  // namespace athanor::cli
