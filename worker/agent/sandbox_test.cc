#include "worker/agent/sandbox.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

TEST(RendezvousSecret, OnePerAttemptTheSameOnEveryNode) {
  const std::string key = "0123456789abcdef-cluster";
  std::string s = Sandbox::RendezvousSecret(key, "42", 1);
  EXPECT_EQ(s.size(), 64u);  // HMAC-SHA256 in hex
  EXPECT_THAT(s, ::testing::MatchesRegex("[0-9a-f]+"));
  EXPECT_EQ(Sandbox::RendezvousSecret(key, "42", 1), s);  // every node derives the same
  EXPECT_NE(Sandbox::RendezvousSecret(key, "42", 2), s);  // the next attempt's differs
  EXPECT_NE(Sandbox::RendezvousSecret(key, "43", 1), s);  // so does another job's
  EXPECT_NE(Sandbox::RendezvousSecret(key + "x", "42", 1), s);
  EXPECT_EQ(Sandbox::RendezvousSecret("", "42", 1), "");  // no key: no secret
}

TEST(SandboxHiddenBy, NamesTheMountThatHidesACommand) {
  const std::vector<std::string> mounts = {"ro::/var/agent", "tmpfs::/tmp", "ro::/root",
                                           "bind:/var/agent/jobs/7/work:/var/agent/jobs/7/work",
                                           "bind:/tmp/shared:/tmp/shared", "dev:/dev/nvidia0:/dev/nvidia0"};
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/tmp/train.sh"), "/tmp");
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/tmp/../tmp/x/train"), "/tmp");
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/root/bin/train"), "/root");
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/var/agent/bin/x"), "/var/agent");
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/var/agent/jobs/7/work/train.py"), "");  // bound back in
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/tmp/shared/train"), "");                // a shared dir
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/tmpfoo/train"), "");                    // only a prefix
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "/usr/bin/python3"), "");
  EXPECT_EQ(Sandbox::HiddenBy(mounts, "train.sh"), "");  // found in the cwd or PATH
}

TEST(SandboxCreate, RefusesWithoutRootAndSaysWhy) {
  if (geteuid() == 0) {
    // As root the refusal cannot happen here; tests/sandbox covers an unprivileged agent.
    SandboxOptions o;
    o.exec_path = "/nonexistent/athanor-sandbox-exec";
    o.work_dir = ::testing::TempDir();
    auto s = Sandbox::Create(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.status().message(), ::testing::HasSubstr("cannot execute the sandbox helper /nonexistent"));
    return;
  }
  auto s = Sandbox::Create(SandboxOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("does not run as root"));
}

}  // namespace
}  // namespace athanor::agent
