// Value parsers of the `athanor` CLI: durations, sizes, times and --env
// assignments. Pure; thread-safe; no I/O (so they can be fuzzed alone).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace athanor::cli {

// "90", "90s", "10m", "1h", "2d" -> seconds; nullopt when malformed.
std::optional<int64_t> ParseDurationSeconds(const std::string& text);
// "4096" (MB), "512M", "80G", "1T" -> MB; nullopt when malformed.
std::optional<int64_t> ParseMegabytes(const std::string& text);
// "2026-01-31", "2026-01-31T12:00:00[Z]" (UTC), or a duration meaning that
// long ago (relative to `now_unix`) -> Unix seconds.
std::optional<int64_t> ParseSince(const std::string& text, int64_t now_unix);
// "K=V" into env[K] = V. InvalidArgument when there is no '=', K is empty or
// not a variable name ([A-Za-z_][A-Za-z0-9_]*), or V holds a NUL byte.
absl::Status ParseEnvAssignment(const std::string& text, std::map<std::string, std::string>* env);

}  // namespace athanor::cli
