// The `athanor-ckpt` operator tool, as a function so tests can drive it:
//   athanor-ckpt ls URI JOB [--json]   committed steps (step, bytes, time, world)
//   athanor-ckpt verify URI JOB STEP   checks every shard's size and CRC32C
// Returns the process exit code: 0 ok, 1 verification failed / not found,
// 2 usage or store errors. Registers the built-in stores.
#pragma once

#include <ostream>

namespace athanor {

int RunCkptTool(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace athanor
