// Value parsers of the `athanor` CLI: durations, sizes, times, months and
// --env assignments. Pure; thread-safe; no I/O (so they can be fuzzed alone).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace athanor::cli {

// "90", "90s", "10m", "1h", "2d" -> seconds; nullopt when malformed.
std::optional<int64_t> ParseDurationSeconds(const std::string& text);
// "4096" (MB), "512M", "80G", "1T" -> MB; nullopt when malformed.
std::optional<int64_t> ParseMegabytes(const std::string& text);
// A job's size for --nodes: "N" (a fixed gang) or "MIN:MAX" (elastic,
// 1 <= MIN <= MAX). InvalidArgument saying what is wrong otherwise.
struct NodeRange {
  int32_t min = 0;  // 0: a fixed gang of `max`
  int32_t max = 0;
};
absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text);
// "2026-01-31", "2026-01-31T12:00:00[Z]" (UTC), or a duration meaning that
// long ago (relative to `now_unix`) -> Unix seconds.
std::optional<int64_t> ParseSince(const std::string& text, int64_t now_unix);
// A point in time: Unix seconds ("1796292000") or a UTC date and time
// ("2026-12-03T10:00:00Z", "2026-12-03T10:00:00", "2026-12-03") -> Unix
// seconds; nullopt when malformed.
std::optional<int64_t> ParseUnixTime(const std::string& text);
// "2026-12": a year of four digits, a month 01..12. InvalidArgument naming
// `what` and the text otherwise.
absl::Status CheckMonth(const std::string& text, const std::string& what);
// "K=V" into env[K] = V. InvalidArgument when there is no '=', K is empty or
// not a variable name ([A-Za-z_][A-Za-z0-9_]*), or V holds a NUL byte.
absl::Status ParseEnvAssignment(const std::string& text, std::map<std::string, std::string>* env);

// A --volume argument: "NAME:/path", "NAME:/path:ro" or "NAME:/path:rw".
// InvalidArgument naming the text when NAME is empty, the path is not
// absolute or the mode is another word; the coordinator checks the rest.
struct VolumeArg {
  std::string name;
  std::string path;
  bool read_only = false;
};
absl::StatusOr<VolumeArg> ParseVolumeArg(const std::string& text);

}  // namespace athanor::cli
