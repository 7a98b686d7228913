// Small socket helpers shared by servers, launchers and tests.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace athanor {

// A TCP port on `host` that was free a moment ago (bind to port 0, read it back,
// close). Racy by nature; used for tests and for MASTER_PORT by local launchers.
absl::StatusOr<int> PickFreePort(const std::string& host = "127.0.0.1");

// This machine's host name.
std::string LocalHostname();

}  // namespace athanor
