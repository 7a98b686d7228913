// Runs N local ranks of any program with the env contract
// (docs/architecture.md, "The env contract"):
// RANK, WORLD_SIZE, LOCAL_RANK=RANK, LOCAL_WORLD_SIZE=N, NODE_RANK=0,
// MASTER_ADDR=127.0.0.1, a free MASTER_PORT, ATHANOR_JOB_ID.
//
// Each rank's stdout/stderr lines are prefixed "[r] " and copied to our
// stdout/stderr. SIGTERM and SIGINT are forwarded to every rank. When a rank
// fails (non-zero exit or killed), the others get SIGTERM, then SIGKILL after
// `grace`; the launcher reports which rank failed and how and returns that
// rank's exit code (128+signal when killed). Otherwise returns 0.
//
// Threading: call from the main thread; installs SIGTERM/SIGINT/SIGCHLD
// handlers for its duration.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

struct LocalLaunchOptions {
  int nproc = 1;
  std::vector<std::string> command;
  std::string job_id = "local";
  int master_port = 0;  // 0: pick a free one
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
};

// Errors only when ranks cannot be started (InvalidArgument, NotFound...).
absl::StatusOr<int> RunLocalRanks(const LocalLaunchOptions& options);

}  // namespace athanor
