// The `athanor volume` commands (cli_volume.cc), over the coordinator's
// Volumes service, and the pieces of them that tests reach.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/athanor_data.pb.h"

namespace athanor::cli {

// A size as people write it: bytes ("1048576"), or a whole number with a
// binary unit K, M, G, T or P, optionally followed by "i" and/or "B" ("10G",
// "512Mi", "1TiB": 10 GiB, 512 MiB, 1 TiB). InvalidArgument naming `what`
// for anything else, zero, or more than 2^62 bytes.
absl::StatusOr<int64_t> ParseSize(const std::string& what, const std::string& text);
// 10737418240 -> "10 GiB", 1536 -> "1.5 KiB", 100 -> "100 B" (one decimal at most).
std::string FormatSize(int64_t bytes);

// `volume ls`'s table: NAME TENANT SIZE USED GENERATION SYNCED SNAPSHOTS USED-BY.
std::string FormatVolumes(const rpc::ListVolumesResponse& resp);

}  // namespace athanor::cli
