// A watchdog for tests that drive a coordinator child process: when a test
// hangs, SIGALRM writes a line to stderr, SIGKILLs the coordinator it was
// told of (so that no child outlives the binary) and ends the binary with
// exit code 99, so that a hang fails fast instead of at CTest's timeout.
//
// Process-wide (one SIGALRM); async-signal-safe on expiry. Call from the
// test's thread.
#pragma once

#include <sys/types.h>

namespace athanor::bench {

// Arms (or re-arms) the watchdog: `seconds` from now. `message` must outlive
// the test (a literal).
void ArmWatchdog(unsigned seconds, const char* message);
// The coordinator to kill on expiry; 0: none. Call again after each restart.
void WatchCoordinator(pid_t pid);
void DisarmWatchdog();

}  // namespace athanor::bench
