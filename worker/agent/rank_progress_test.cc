// What the agent reads of a rank's progress: the page, whether a process of
// the rank is stopped, and where the page is placed.
#include "worker/agent/rank_progress.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "proto/athanor.pb.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {
namespace {

// Waits (bounded) for `pid`'s state letter to satisfy `stopped`.
bool AwaitStopped(pid_t pid, bool stopped) {
  for (int i = 0; i < 500; ++i) {
    if (ReadRankProgress("", pid).stopped == stopped) return true;
    usleep(10000);
  }
  return false;
}

TEST(RankProgressTest, StoppedChildOfTheRankIsSeen) {
  pid_t leader = fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {  // the rank: a leader with one child that sleeps
    pid_t child = fork();
    if (child == 0) {
      execlp("sleep", "sleep", "60", nullptr);
      _exit(127);
    }
    int status;
    waitpid(child, &status, 0);
    _exit(0);
  }
  // The child shows up in the tree once it has been forked.
  std::vector<pid_t> tree;
  for (int i = 0; i < 500 && tree.size() < 2; ++i) {
    tree = ProcessTree(leader);
    if (tree.size() < 2) usleep(10000);
  }
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree[0], leader);
  EXPECT_FALSE(ReadRankProgress("", leader).stopped);
  ASSERT_EQ(kill(tree[1], SIGSTOP), 0);
  EXPECT_TRUE(AwaitStopped(leader, true));
  ASSERT_EQ(kill(tree[1], SIGCONT), 0);
  EXPECT_TRUE(AwaitStopped(leader, false));
  kill(tree[1], SIGKILL);
  int status;
  waitpid(leader, &status, 0);
}

TEST(RankProgressTest, PageIsReadAndSentWithItsFields) {
  char tmpl[] = "/tmp/rank-progress-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ProgressPaths unsandboxed = PlanProgressPage(dir + "/rank-3.log", "", 3);
  EXPECT_EQ(unsandboxed.in_rank, dir + "/rank-3.progress");
  EXPECT_EQ(unsandboxed.on_host, unsandboxed.in_rank);
  ProgressPaths boxed = PlanProgressPage(dir + "/rank-3.log", "/dev/shm/athanor-x/7.1", 3);
  EXPECT_EQ(boxed.in_rank, "/dev/shm/athanor-progress-3");
  EXPECT_EQ(boxed.on_host, "/dev/shm/athanor-x/7.1/athanor-progress-3");

  EXPECT_FALSE(ReadRankProgress(unsandboxed.on_host, getpid()).seen);  // no page yet
  absl::StatusOr<std::unique_ptr<ProgressWriter>> w = ProgressWriter::Open(unsandboxed.in_rank);
  ASSERT_TRUE(w.ok()) << w.status();
  (*w)->StepDone(12, 3.5, 4.25);
  uint64_t seq = (*w)->CollectiveIssued();
  (*w)->WaitBegin(seq, ProgressOp::kAllReduce);
  RankProgress p = ReadRankProgress(unsandboxed.on_host, getpid());
  ASSERT_TRUE(p.seen);
  EXPECT_FALSE(p.stopped);
  rpc::RankReport report;
  ProgressToProto(p, &report);
  EXPECT_TRUE(report.progress().seen());
  EXPECT_EQ(report.progress().step(), 12);
  EXPECT_DOUBLE_EQ(report.progress().step_compute_ms(), 3.5);
  EXPECT_DOUBLE_EQ(report.progress().step_ms(), 4.25);
  EXPECT_EQ(report.progress().collective_seq(), 1u);
  EXPECT_EQ(report.progress().waiting_seq(), 1u);
  EXPECT_EQ(report.progress().waiting_op(), "all-reduce");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace athanor::agent
