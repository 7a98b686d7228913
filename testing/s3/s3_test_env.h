// One s3rver per test binary, started by a gtest Environment, with a
// watchdog: if the binary runs past its deadline, SIGALRM kills the server's
// process group and exits, so a hang fails fast and leaves nothing behind.
#pragma once

#include <cstdlib>
#include <string>

#include "testing/s3/s3rver_fixture.h"

namespace athanor::testing_s3 {

// The running server, or null when it could not start (tests then skip with
// the reason from SkipReason()).
S3rverProcess* Server();
std::string SkipReason();

// Registers the environment; call from a test file at namespace scope via
//   static auto* env = RegisterS3rverEnvironment("bucket", 120);
void* RegisterS3rverEnvironment(const std::string& bucket, int watchdog_seconds);

}  // namespace athanor::testing_s3

// Skips when s3rver is missing, unless ATHANOR_REQUIRE_S3RVER is set (scripts/test
// sets it, since scripts/install-test-tools installs s3rver): then a missing server fails.
#define ATHANOR_REQUIRE_S3RVER()                                                         \
  do {                                                                                   \
    if (::athanor::testing_s3::Server() != nullptr) break;                               \
    if (std::getenv("ATHANOR_REQUIRE_S3RVER") != nullptr)                                \
      FAIL() << "s3rver unavailable: " << ::athanor::testing_s3::SkipReason();           \
    GTEST_SKIP() << "s3rver unavailable: " << ::athanor::testing_s3::SkipReason();       \
  } while (0)
