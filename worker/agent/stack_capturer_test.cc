#include "worker/agent/stack_capturer.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/clock.h"

namespace athanor::agent {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A rank whose process tree holds `children` sleeping processes besides its shell.
class HungRank : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/stack_capturer_test.XXXXXX";
    work_dir_ = mkdtemp(dir);
    supervisor_ = std::make_unique<RankSupervisor>(work_dir_, RealClock::Get());
  }
  void TearDown() override {
    supervisor_->KillAll();
    std::filesystem::remove_all(work_dir_);
  }
  // Starts the rank and returns once its `children` sleepers run (the log says so).
  RankTarget Start(int children) {
    RankTarget t;
    t.key = {"9", 1, 0};
    t.command = {"sh", "-c",
                 "i=0; while [ $i -lt " + std::to_string(children) +
                     " ]; do sleep 60 & i=$((i+1)); done; echo ready; wait"};
    t.kill_after_ms = 1000;
    supervisor_->Converge({t});
    log_ = *RankSupervisor::LogPath(work_dir_, t.key);
    // The rank writes its log asynchronously; poll the file, bounded (10 s).
    for (int i = 0; i < 2000 && ReadAll(log_).find("ready") == std::string::npos; ++i) {
      usleep(5000); /* sleep override */
    }
    EXPECT_NE(ReadAll(log_).find("ready"), std::string::npos);
    return t;
  }
  std::string work_dir_, log_;
  std::unique_ptr<RankSupervisor> supervisor_;
};

TEST_F(HungRank, CaptureIsBoundedInProcesses) {
  if (geteuid() != 0) GTEST_SKIP() << "attaching a debugger to another process needs root (CI runs as root)";
  Start(5);  // the shell and 5 sleepers: 6 processes
  std::vector<pid_t> tree;
  for (const RankStatusReport& r : supervisor_->Reports()) tree = ProcessTree(r.pid);
  ASSERT_EQ(tree.size(), 6u);
  StackCaptureBounds bounds;
  bounds.max_processes = 2;
  std::string stacks = CaptureStacks(supervisor_.get(), tree[0], bounds);
  size_t captured = 0;
  for (size_t at = stacks.find("--- pid "); at != std::string::npos; at = stacks.find("--- pid ", at + 1)) ++captured;
  EXPECT_EQ(captured, 2u) << stacks;
  EXPECT_NE(stacks.find("(4 more process(es) not captured: at most 2 processes and 10000 ms a rank)"),
            std::string::npos)
      << stacks;
}

TEST_F(HungRank, CapturesOffTheCallersThreadIntoTheLog) {
  if (geteuid() != 0) GTEST_SKIP() << "attaching a debugger to another process needs root (CI runs as root)";
  RankTarget t = Start(1);
  StackCapturer capturer(supervisor_.get(), StackCaptureBounds{});
  t.capture_stacks = true;
  supervisor_->Converge({t});
  capturer.TakeNew();  // returns at once; the capture runs on the capturer's thread
  capturer.Drain();
  std::string log = ReadAll(log_);
  EXPECT_NE(log.find("athanor: hang detected; thread stacks of rank 0:\n--- pid "), std::string::npos) << log;
  EXPECT_NE(log.find("athanor: end of stacks\n"), std::string::npos) << log;
  // Asked once: a second Converge queues nothing more.
  supervisor_->Converge({t});
  capturer.TakeNew();
  capturer.Drain();
  std::string again = ReadAll(log_);
  EXPECT_EQ(again.find("athanor: end of stacks\n", log.find("athanor: end of stacks\n") + 1), std::string::npos);
}

}  // namespace
}  // namespace athanor::agent
