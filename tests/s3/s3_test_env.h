// One s3rver per test binary, started by a gtest Environment, with a
// watchdog: if the binary runs past its deadline, SIGALRM kills the server's
// process group and exits, so a hang fails fast and leaves nothing behind.
#pragma once

#include <string>

#include "tests/s3/s3rver_fixture.h"

namespace athanor::testing_s3 {

// The running server, or null when it could not start (tests then skip with
// the reason from SkipReason()).
S3rverProcess* Server();
std::string SkipReason();

// Registers the environment; call from a test file at namespace scope via
//   static auto* env = RegisterS3rverEnvironment("bucket", 120);
void* RegisterS3rverEnvironment(const std::string& bucket, int watchdog_seconds);

}  // namespace athanor::testing_s3

#define ATHANOR_REQUIRE_S3RVER()                                                         \
  if (::athanor::testing_s3::Server() == nullptr)                                        \
  GTEST_SKIP() << "s3rver unavailable: " << ::athanor::testing_s3::SkipReason()
