// What a notebook server says of its kernels (GET <base_url>api/kernels over
// its unix socket, with the rank's token), for the idle clock: a kernel that
// executes, or did lately, is use (docs/operations.md, "Notebooks").
//
// Blocking, with a deadline on every socket operation; no state. The reply
// is read up to kMaxReplyBytes and parsed with nlohmann-json; anything else
// than a JSON array of kernels is an error naming what was wrong.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::agent {

struct KernelActivity {
  int32_t busy = 0;                 // kernels whose execution_state is "busy"
  int64_t last_activity_unix = 0;   // newest last_activity (0: no kernel)
};

inline constexpr size_t kMaxKernelReplyBytes = size_t{1} << 20;

// Parses the JSON of api/kernels. InvalidArgument naming what was wrong.
absl::StatusOr<KernelActivity> ParseKernels(const std::string& body);

// One probe over the unix socket at `socket_path` (at most 107 bytes);
// `timeout_ms` bounds each send and receive. Unavailable when the server
// cannot be reached, Internal for a reply that is not 200 (with its status).
absl::StatusOr<KernelActivity> ProbeKernels(const std::string& socket_path, const std::string& base_url,
                                            const std::string& token, int timeout_ms);

}  // namespace athanor::agent
