// What the agent reads of a rank's progress: the page, whether a process of
// the rank is stopped, and where the page is placed.
#include "worker/agent/rank_progress.h"

#include <poll.h>
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

// The next byte the rank's leader writes to `fd` (bounded: '\0' after 10 s).
char NextEvent(int fd) {
  pollfd p{fd, POLLIN, 0};
  char c = 0;
  if (poll(&p, 1, 10000) != 1 || read(fd, &c, 1) != 1) return 0;
  return c;
}

TEST(RankProgressTest, StoppedChildOfTheRankIsSeen) {
  int events[2];
  ASSERT_EQ(pipe(events), 0);
  pid_t leader = fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {  // the rank: a leader with one child that sleeps
    close(events[0]);
    pid_t child = fork();
    if (child == 0) {
      execlp("sleep", "sleep", "60", nullptr);
      _exit(127);
    }
    // Tells the test, as events, that the child exists, stopped, continued.
    (void)!write(events[1], "f", 1);
    int status;
    while (waitpid(child, &status, WUNTRACED | WCONTINUED) == child) {
      if (WIFSTOPPED(status)) (void)!write(events[1], "s", 1);
      else if (WIFCONTINUED(status)) (void)!write(events[1], "c", 1);
      else break;
    }
    _exit(0);
  }
  close(events[1]);
  ASSERT_EQ(NextEvent(events[0]), 'f');
  std::vector<pid_t> tree = ProcessTree(leader);
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree[0], leader);
  EXPECT_FALSE(ReadRankProgress("", leader).stopped);
  ASSERT_EQ(kill(tree[1], SIGSTOP), 0);
  ASSERT_EQ(NextEvent(events[0]), 's');
  EXPECT_TRUE(ReadRankProgress("", leader).stopped);
  ASSERT_EQ(kill(tree[1], SIGCONT), 0);
  ASSERT_EQ(NextEvent(events[0]), 'c');
  EXPECT_FALSE(ReadRankProgress("", leader).stopped);
  kill(tree[1], SIGKILL);
  int status;
  waitpid(leader, &status, 0);
  close(events[0]);
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
