#include "coordinator/health/rank_reports.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace athanor::coord {
namespace {

RankReport Report(RankPhase phase, int32_t exit_code = 0, int32_t signal = 0,
                  std::string message = "") {
  RankReport r;
  r.phase = phase;
  r.exit_code = exit_code;
  r.signal = signal;
  r.message = std::move(message);
  return r;
}

TEST(RankReportsTest, ARunningReportStartsTheRankOnce) {
  RankStatus st;
  EXPECT_TRUE(ApplyRankReport(Report(RankPhase::kRunning), &st));
  EXPECT_TRUE(st.started);
  EXPECT_FALSE(st.exited);
  EXPECT_FALSE(ApplyRankReport(Report(RankPhase::kRunning), &st));
}

TEST(RankReportsTest, AnExitIsFinal) {
  RankStatus st;
  EXPECT_TRUE(ApplyRankReport(Report(RankPhase::kExited, 137, 9, "out of memory"), &st));
  EXPECT_TRUE(st.started);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.exit_code, 137);
  EXPECT_EQ(st.signal, 9);
  EXPECT_EQ(st.message, "out of memory");
  EXPECT_FALSE(ApplyRankReport(Report(RankPhase::kExited, 0), &st));
  EXPECT_FALSE(ApplyRankReport(Report(RankPhase::kRunning), &st));
  EXPECT_EQ(st.exit_code, 137);
}

TEST(RankReportsTest, AFailedStartExitsWith127UnlessGivenACode) {
  RankStatus st;
  EXPECT_TRUE(ApplyRankReport(Report(RankPhase::kFailedToStart, 0, 0, "no such file"), &st));
  EXPECT_FALSE(st.started);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.exit_code, 127);
  RankStatus other;
  EXPECT_TRUE(ApplyRankReport(Report(RankPhase::kFailedToStart, 126), &other));
  EXPECT_EQ(other.exit_code, 126);
}

TEST(RankReportsTest, AWholeSandboxMessageIsKept) {
  const std::string message =
      "cannot sandbox: the command /root/train.sh lies under /root, which the rank's sandbox hides "
      "(ranks get a private /tmp and do not see /root, /home, /run or the agent's work dir); install "
      "it elsewhere, ship it in the job's workdir, or start the agent with --sandbox-shared-dir for "
      "its folder";
  RankStatus st;
  ApplyRankReport(Report(RankPhase::kFailedToStart, 0, 0, message), &st);
  EXPECT_EQ(st.message, message);
}

TEST(RankReportsTest, AnOverlongMessageIsCutAtAWordTo4KiB) {
  std::string message;
  while (message.size() < 5000) message += "word ";  // "word " x 1000
  RankStatus st;
  ApplyRankReport(Report(RankPhase::kExited, 1, 0, message), &st);
  // 4093 bytes leave room for 818 words ("word " x 818 = 4090 bytes) and the mark.
  std::string expected;
  for (int i = 0; i < 818; ++i) expected += i == 0 ? "word" : " word";
  EXPECT_EQ(st.message, expected + "\xE2\x80\xA6");
}

std::vector<RankStatus> Ranks(int n) {
  std::vector<RankStatus> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i].rank = i;
  return ranks;
}

TEST(RankReportsTest, TheVerdictFollowsTheRanks) {
  using Kind = AttemptVerdict::Kind;
  std::vector<RankStatus> ranks = Ranks(2);
  EXPECT_EQ(JudgeAttempt(ranks).kind, Kind::kUnchanged);
  ranks[0].started = true;
  EXPECT_EQ(JudgeAttempt(ranks).kind, Kind::kUnchanged);
  ranks[1].started = true;
  EXPECT_EQ(JudgeAttempt(ranks).kind, Kind::kAllStarted);
  ranks[0].exited = true;  // exit 0, the other still runs
  EXPECT_EQ(JudgeAttempt(ranks).kind, Kind::kAllStarted);
  ranks[1].exited = true;
  AttemptVerdict v = JudgeAttempt(ranks);
  EXPECT_EQ(v.kind, Kind::kSucceeded);
  EXPECT_EQ(v.failed, nullptr);
}

TEST(RankReportsTest, ARankKilledByASignalIsBlamedBeforeAnEarlierExit) {
  std::vector<RankStatus> ranks = Ranks(3);
  for (RankStatus& st : ranks) st.started = st.exited = true;
  ranks[0].exit_code = 0;
  ranks[1].exit_code = 1;
  ranks[2].exit_code = 137;
  ranks[2].signal = 9;
  AttemptVerdict v = JudgeAttempt(ranks);
  EXPECT_EQ(v.kind, AttemptVerdict::Kind::kFailed);
  EXPECT_EQ(v.failed, &ranks[2]);
  ranks[2].signal = 0;  // two plain exits: the first is blamed
  EXPECT_EQ(JudgeAttempt(ranks).failed, &ranks[1]);
}

TEST(RankReportsTest, TheFailureNamesRankNodeAndCause) {
  std::vector<RankPlacement> allocation(2);
  allocation[0].node = "gpu-a";
  allocation[1].rank = 1;
  allocation[1].node = "gpu-b";
  RankStatus st;
  st.rank = 1;
  st.exit_code = 3;
  EXPECT_EQ(RankFailure(allocation, st), "rank 1 on node gpu-b exited with code 3");
  st.exit_code = 137;
  st.signal = 9;
  st.message = "out of memory";
  EXPECT_EQ(RankFailure(allocation, st),
            "rank 1 on node gpu-b was killed by signal 9 (exit code 137): out of memory");
}

}  // namespace
}  // namespace athanor::coord
