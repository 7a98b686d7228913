#include "common/subprocess.h"

#include <signal.h>

#include <memory>
#include <thread>

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(Subprocess, CapturesOutputAndExitCode) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo hello $GREETING; exit 3"};
  o.env = {{"GREETING", "world"}};
  o.capture_stdout = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->ReadAllStdout(), "hello world\n");
  ExitInfo e = (*p)->Wait();
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 0);
}

TEST(Subprocess, MissingProgramIsNotFound) {
  SubprocessOptions o;
  o.argv = {"/nonexistent/athanor-no-such-program"};
  auto p = Subprocess::Start(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("athanor-no-such-program"), std::string::npos);
}

TEST(Subprocess, EmptyCommandIsInvalid) {
  EXPECT_EQ(Subprocess::Start(SubprocessOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Subprocess, SignalReachesTheGroup) {
  SubprocessOptions o;
  // The shell waits on a child; killing the group ends both.
  o.argv = {"sh", "-c", "echo started; sleep 600 & wait"};
  o.capture_stdout = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  char buf[8];
  ASSERT_EQ(read((*p)->stdout_fd(), buf, 8), 8);  // "started\n": the child is up
  ASSERT_TRUE((*p)->Signal(SIGKILL).ok());
  ExitInfo e = (*p)->Wait();
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(e.exit_code, 128 + SIGKILL);
  EXPECT_EQ((*p)->ReadAllStdout(), "");  // EOF: no member of the group holds the pipe
}

TEST(Subprocess, WaitForReturnsAtExitOrAfterTheTimeout) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "exit 3"};
  auto quick = Subprocess::Start(o);
  ASSERT_TRUE(quick.ok());
  std::optional<ExitInfo> e = (*quick)->WaitFor(std::chrono::seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 3);

  o.argv = {"sleep", "600"};
  auto slow = Subprocess::Start(o);
  ASSERT_TRUE(slow.ok());
  EXPECT_FALSE((*slow)->WaitFor(std::chrono::milliseconds(20)).has_value());
  ASSERT_TRUE((*slow)->Signal(SIGKILL).ok());
  e = (*slow)->WaitFor(std::chrono::seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->signal, SIGKILL);
}

}  // namespace
}  // namespace athanor

namespace athanor {
namespace {

// A child asked for a parent-death signal gets it when the thread that
// started it ends (as when its whole process dies), and one not asked does not.
TEST(Subprocess, ParentDeathSignalReachesTheChild) {
  std::unique_ptr<Subprocess> told, untold;
  std::thread starter([&] {
    SubprocessOptions o;
    o.argv = {"sleep", "30"};
    o.parent_death_signal = SIGTERM;
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    told = std::move(*p);
    o.parent_death_signal = 0;
    p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    untold = std::move(*p);
  });
  starter.join();
  ASSERT_NE(told, nullptr);
  ExitInfo e = told->Wait();  // ends only through the signal (sleep 30 is the watchdog)
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_FALSE(untold->WaitFor(std::chrono::milliseconds(100)).has_value());
  ASSERT_TRUE(untold->Signal(SIGKILL).ok());
  EXPECT_EQ(untold->Wait().signal, SIGKILL);
}

}  // namespace
}  // namespace athanor
