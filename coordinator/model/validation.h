// Checks on what clients send, before anything reaches the state machine.
// Every refusal is InvalidArgument naming the offending field, so a hostile
// or mistaken request never gets further than this. Pure; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

inline constexpr size_t kMaxStringBytes = 4 * 1024;     // names, tenants, URIs, ids
inline constexpr size_t kMaxCommandEnvBytes = 64 * 1024;  // command + env, all together
inline constexpr int32_t kMaxNodesPerJob = 100000;
inline constexpr int32_t kMaxGpusPerNode = 1024;
inline constexpr int64_t kMaxSeconds = int64_t{10} * 365 * 24 * 3600;  // time fields
inline constexpr size_t kMaxIdempotencyKeyBytes = 128;
inline constexpr size_t kMaxResourceNameBytes = 128;  // images, volumes, snapshots
inline constexpr size_t kMaxVolumesPerJob = 32;

absl::Status ValidateJobSpec(const JobSpec& spec);

// An id or node name: 1..kMaxStringBytes bytes, printable ASCII, no '/'.
absl::Status ValidateName(const std::string& field, const std::string& value);

absl::Status ValidateInventory(const NodeInventory& inv);

// An image's, volume's or snapshot's name: 1..128 bytes of [A-Za-z0-9._-],
// not "." or "..", so that it is safe in object keys, folder names and URLs.
absl::Status ValidateResourceName(const std::string& field, const std::string& value);

// Where a volume is mounted in a rank's sandbox: absolute and normalised (no
// empty, "." or ".." part, no trailing '/'), at most 4 KiB, not "/" and not
// in the folders the sandbox makes itself (/proc, /dev, /sys, /tmp, /.athanor).
absl::Status ValidateMountPath(const std::string& field, const std::string& path);

// Empty (no deduplication) or 1..128 printable ASCII bytes.
absl::Status ValidateIdempotencyKey(const std::string& key);

}  // namespace athanor::coord
