// Checks on what clients send, before anything reaches the state machine.
// Every refusal is InvalidArgument naming the offending field, so a hostile
// or mistaken request never gets further than this. Pure; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "coordinator/types.h"

namespace athanor::coord {

inline constexpr size_t kMaxStringBytes = 4 * 1024;     // names, tenants, URIs, ids
inline constexpr size_t kMaxCommandEnvBytes = 64 * 1024;  // command + env, all together
inline constexpr int32_t kMaxNodesPerJob = 100000;
inline constexpr int32_t kMaxGpusPerNode = 1024;

absl::Status ValidateJobSpec(const JobSpec& spec);

// An id or node name: 1..kMaxStringBytes bytes, printable ASCII, no '/'.
absl::Status ValidateName(const std::string& field, const std::string& value);

absl::Status ValidateInventory(const NodeInventory& inv);

}  // namespace athanor::coord
