// HangDetector, driven by a FakeClock: timeouts (default, by median step
// time, per job), suspect naming and straggler flags. ClusterState's handling
// of its verdicts is in core/cluster_state_hangs_test.cc.
#include "coordinator/health/hang_detector.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/health/test_util.h"

namespace athanor::coord {
namespace {

using testing::ProgressReport;

JobRecord Running(const std::string& id, int32_t attempt, int64_t hang_timeout_s = 0) {
  JobRecord j;
  j.id = id;
  j.attempt = attempt;
  j.state = JobState::kRunning;
  j.spec.hang_timeout_s = hang_timeout_s;
  return j;
}

class HangDetectorTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  HangDetector det_{HangOptions(), &clock_};
};

TEST_F(HangDetectorTest, StoppedRankIsNamedAfterTheDefaultTimeoutNotBefore) {
  JobRecord job = Running("7", 1);
  det_.Observe("node-a", ProgressReport("7", 1, 0, 10, 40));
  det_.Observe("node-b", ProgressReport("7", 1, 1, 10, 40));
  clock_.Advance(Seconds(1));
  // Rank 0 moved into all-reduce #41; rank 1 is stopped mid-step. The
  // timeout runs from rank 1's own last progress (t = 0), not rank 0's move.
  det_.Observe("node-a", ProgressReport("7", 1, 0, 10, 41, 41));
  det_.Observe("node-b", ProgressReport("7", 1, 1, 10, 40, 0, /*stopped=*/true));
  clock_.Advance(Seconds(28.9));
  EXPECT_TRUE(det_.Check({&job}).empty());
  clock_.Advance(Seconds(0.1));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].job_id, "7");
  EXPECT_EQ(v[0].attempt, 1);
  EXPECT_EQ(v[0].suspect, 1);
  EXPECT_EQ(v[0].node, "node-b");
  EXPECT_DOUBLE_EQ(v[0].stalled_s, 29);
  EXPECT_EQ(v[0].reason,
            "hang: rank 1 on node-b made no progress for 30 s (a process of it is stopped; "
            "peers waiting in all-reduce #41)");
  EXPECT_TRUE(det_.Check({&job}).empty());  // judged once
}

// A peer that keeps moving after a rank's process stopped (it finishes a
// checkpoint save before it blocks) does not push the stopped rank's
// verdict back; without a stopped process, the same move would.
TEST_F(HangDetectorTest, PeersMovingAfterARankStoppedDoNotDelayTheVerdict) {
  JobRecord job = Running("7", 1);
  det_.Observe("node-a", ProgressReport("7", 1, 0, 400, 960));
  det_.Observe("node-b", ProgressReport("7", 1, 1, 400, 960));
  clock_.Advance(Seconds(1));
  det_.Observe("node-a", ProgressReport("7", 1, 0, 400, 960, 0, /*stopped=*/true));
  det_.Observe("node-b", ProgressReport("7", 1, 1, 400, 960));
  clock_.Advance(Seconds(19));
  // Rank 1 finished its save and now waits in the next all-reduce.
  det_.Observe("node-b", ProgressReport("7", 1, 1, 400, 962, 961));
  clock_.Advance(Seconds(9.9));
  EXPECT_TRUE(det_.Check({&job}).empty());
  clock_.Advance(Seconds(0.1));  // 30 s after rank 0's last progress, 10 s after rank 1's
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 0);
  EXPECT_EQ(v[0].node, "node-a");
}

TEST_F(HangDetectorTest, StoppedRankWhilePeersWaitInTheirCheckpointSaveSaysSo) {
  JobRecord job = Running("7", 1);
  det_.Observe("node-a", ProgressReport("7", 1, 0, 15, 30));
  det_.Observe("node-b", ProgressReport("7", 1, 1, 15, 30));
  clock_.Advance(Seconds(1));
  // Rank 0 waits for its earlier save's commit, which needs rank 1's vote.
  RankReport saving = ProgressReport("7", 1, 0, 16, 32);
  saving.progress.waiting_op = "checkpoint save";
  det_.Observe("node-a", saving);
  det_.Observe("node-b", ProgressReport("7", 1, 1, 15, 31, 0, /*stopped=*/true));
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 1);
  EXPECT_EQ(v[0].node, "node-b");
  EXPECT_EQ(v[0].reason,
            "hang: rank 1 on node-b made no progress for 30 s (a process of it is stopped; "
            "peers waiting in checkpoint save)");
}

TEST_F(HangDetectorTest, RankThatHasNotEnteredThePeersCollectiveIsTheSuspect) {
  JobRecord job = Running("7", 2);
  for (int r = 0; r < 4; ++r) det_.Observe(absl::StrCat("n", r), ProgressReport("7", 2, r, 5, 5811));
  clock_.Advance(Seconds(1));
  for (int r : {0, 1, 2}) {
    det_.Observe(absl::StrCat("n", r), ProgressReport("7", 2, r, 5, 5812, 5812));
  }
  // Rank 3 never issued #5812 (issue count 5811) and is in no collective.
  det_.Observe("node-d", ProgressReport("7", 2, 3, 5, 5811));
  clock_.Advance(Seconds(31));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 3);
  EXPECT_EQ(v[0].node, "node-d");
  EXPECT_EQ(v[0].reason,
            "hang: rank 3 on node-d made no progress for 32 s (it has not entered all-reduce #5812 "
            "that its peers wait in; it is in no collective, at step 5)");
}

// A rank that went past the all-reduce its peers wait in (it skipped it) and
// blocks in a later one: the lowest collective any rank waits in is the one
// that cannot complete, whichever rank is the skipper and however few ranks.
TEST_F(HangDetectorTest, RankThatSkippedTheCollectiveItsPeersWaitInIsTheSuspect) {
  for (int skipper : {0, 1}) {
    SCOPED_TRACE(skipper);
    JobRecord job = Running(absl::StrCat("s", skipper), 1);
    const int peer = 1 - skipper;
    det_.Observe("node-a", ProgressReport(job.id, 1, 0, 40, 120));
    det_.Observe("node-b", ProgressReport(job.id, 1, 1, 40, 120));
    clock_.Advance(Seconds(1));
    // Both issued #121 (a gradient bucket) and #122 (the loss); the peer
    // waits in #121, the skipper went past it, finished step 41 and waits in
    // #123, the first all-reduce of step 42.
    det_.Observe(peer == 0 ? "node-a" : "node-b", ProgressReport(job.id, 1, peer, 41, 122, 121));
    det_.Observe(skipper == 0 ? "node-a" : "node-b", ProgressReport(job.id, 1, skipper, 42, 123, 123));
    clock_.Advance(Seconds(30));
    std::vector<HangVerdict> v = det_.Check({&job});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].suspect, skipper);
    const std::string node = skipper == 0 ? "node-a" : "node-b";
    EXPECT_EQ(v[0].node, node);
    EXPECT_EQ(v[0].reason, absl::StrCat("hang: rank ", skipper, " on ", node,
                                        " made no progress for 30 s (it skipped all-reduce #121 "
                                        "that its peers wait in; it waits in all-reduce #123)"));
  }
  JobRecord four = Running("f", 3);
  for (int r = 0; r < 4; ++r) det_.Observe(absl::StrCat("n", r), ProgressReport("f", 3, r, 8, 30));
  clock_.Advance(Seconds(1));
  for (int r : {0, 1, 3}) det_.Observe(absl::StrCat("n", r), ProgressReport("f", 3, r, 8, 31, 31));
  det_.Observe("n2", ProgressReport("f", 3, 2, 8, 32, 32));
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&four});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 2);
  EXPECT_EQ(v[0].reason,
            "hang: rank 2 on n2 made no progress for 30 s (it skipped all-reduce #31 that its "
            "peers wait in; it waits in all-reduce #32)");
}

// Most ranks are past the lowest collective one waits in: they finished it,
// which takes every rank's part, so the one still in it is stuck there.
TEST_F(HangDetectorTest, RankStillInACollectiveItsPeersFinishedIsTheSuspect) {
  JobRecord job = Running("7", 2);
  for (int r = 0; r < 4; ++r) det_.Observe(absl::StrCat("n", r), ProgressReport("7", 2, r, 5, 5811));
  clock_.Advance(Seconds(1));
  for (int r : {0, 1, 2}) det_.Observe(absl::StrCat("n", r), ProgressReport("7", 2, r, 5, 5812, 5812));
  det_.Observe("n3", ProgressReport("7", 2, 3, 5, 5811, 5811));
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 3);
  EXPECT_EQ(v[0].reason,
            "hang: rank 3 on n3 made no progress for 31 s (it is still in all-reduce #5811, which "
            "its peers finished)");
}

TEST_F(HangDetectorTest, EveryRankInOneCollectiveNamesTheOneThatStoppedMovingFirst) {
  JobRecord job = Running("9", 1);
  det_.Observe("a", ProgressReport("9", 1, 0, 3, 9));
  det_.Observe("b", ProgressReport("9", 1, 1, 3, 9));
  clock_.Advance(Seconds(1));
  det_.Observe("b", ProgressReport("9", 1, 1, 3, 10, 10));
  clock_.Advance(Seconds(1));
  det_.Observe("a", ProgressReport("9", 1, 0, 3, 10, 10));
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 1);
  EXPECT_EQ(v[0].reason,
            "hang: rank 1 on b made no progress for 31 s (every rank waits in all-reduce #10)");
}

TEST_F(HangDetectorTest, WithoutCollectivesTheRankWhoseStepStoppedFirstIsNamed) {
  JobRecord job = Running("9", 1);
  det_.Observe("a", ProgressReport("9", 1, 0, 3, 9));
  det_.Observe("b", ProgressReport("9", 1, 1, 3, 9));
  clock_.Advance(Seconds(2));
  det_.Observe("a", ProgressReport("9", 1, 0, 4, 10));  // rank 1 made its last move 2 s earlier
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&job});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].suspect, 1);
  EXPECT_EQ(v[0].reason, "hang: rank 1 on b made no progress for 32 s (no rank in a collective; step 3)");
}

TEST_F(HangDetectorTest, ProgressKeepsAnAttemptAlive) {
  JobRecord job = Running("7", 1);
  for (int i = 0; i < 100; ++i) {
    det_.Observe("a", ProgressReport("7", 1, 0, i, 2 * i));
    det_.Observe("b", ProgressReport("7", 1, 1, i, 2 * i));
    clock_.Advance(Seconds(20));
    EXPECT_TRUE(det_.Check({&job}).empty()) << i;
  }
}

TEST_F(HangDetectorTest, TimeoutGrowsWithTheMedianStepAndAJobMaySetItsOwn) {
  JobRecord job = Running("7", 1);
  EXPECT_EQ(det_.Timeout(job), Seconds(30));
  for (int i = 1; i <= 5; ++i) {
    RankReport r = ProgressReport("7", 1, 0, i, i);
    r.progress.step_ms = i == 5 ? 100000 : 5000;  // median 5 s
    det_.Observe("a", r);
  }
  EXPECT_EQ(det_.Timeout(job), Seconds(50));
  clock_.Advance(Seconds(49));
  EXPECT_TRUE(det_.Check({&job}).empty());
  clock_.Advance(Seconds(1));
  EXPECT_EQ(det_.Check({&job}).size(), 1u);

  JobRecord own = Running("8", 1, /*hang_timeout_s=*/45);
  EXPECT_EQ(det_.Timeout(own), Seconds(45));
  det_.Observe("a", ProgressReport("8", 1, 0, 1, 1));
  clock_.Advance(Seconds(44));
  EXPECT_TRUE(det_.Check({&own}).empty());
  clock_.Advance(Seconds(1));
  EXPECT_EQ(det_.Check({&own}).size(), 1u);
  // A record asking for less than the floor (30 s) gets the floor.
  EXPECT_EQ(det_.Timeout(Running("9", 1, /*hang_timeout_s=*/1)), Seconds(30));
}

TEST_F(HangDetectorTest, VerdictsSayWhetherTheJobCausedTheHang) {
  JobRecord stopped = Running("1", 1), idle = Running("2", 1), collective = Running("3", 1);
  for (const char* id : {"1", "2", "3"}) {
    det_.Observe("a", ProgressReport(id, 1, 0, 4, 4));
    det_.Observe("b", ProgressReport(id, 1, 1, 4, 4));
  }
  clock_.Advance(Seconds(1));
  det_.Observe("b", ProgressReport("1", 1, 1, 4, 4, 0, /*stopped=*/true));
  det_.Observe("a", ProgressReport("3", 1, 0, 5, 5, 5));  // rank 1 never enters all-reduce #5
  clock_.Advance(Seconds(30));
  std::vector<HangVerdict> v = det_.Check({&stopped, &idle, &collective});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].cause, HangCause::kStoppedProcess);
  EXPECT_EQ(v[1].cause, HangCause::kIdle);
  EXPECT_EQ(v[1].reason, "hang: rank 0 on a made no progress for 31 s (no rank in a collective; step 4)");
  EXPECT_EQ(v[2].cause, HangCause::kCollective);
  EXPECT_FALSE(CountsAgainstNode(v[0].cause));
  EXPECT_FALSE(CountsAgainstNode(v[1].cause));
  EXPECT_TRUE(CountsAgainstNode(v[2].cause));
}

TEST_F(HangDetectorTest, RanksWithoutPagesAndOldAttemptsAreNotJudged) {
  JobRecord job = Running("7", 3);
  RankReport no_page;
  no_page.job_id = "7";
  no_page.attempt = 3;
  det_.Observe("a", no_page);
  det_.Observe("a", ProgressReport("7", 2, 0, 1, 1));  // an older attempt's late report
  clock_.Advance(Seconds(300));
  EXPECT_TRUE(det_.Check({&job}).empty());
  // A job no longer running is forgotten.
  det_.Observe("a", ProgressReport("7", 3, 0, 1, 1));
  EXPECT_TRUE(det_.Check({}).empty());
  clock_.Advance(Seconds(300));
  EXPECT_TRUE(det_.Check({&job}).empty());
}

TEST_F(HangDetectorTest, StragglerFlaggedOverKWindowsAndClearedWhenTheSpanIsFast) {
  JobRecord job = Running("7", 1);
  int64_t step = 0;
  auto window = [&](double slow_ms) {
    for (int i = 0; i < 5; ++i) {
      ++step;
      for (int r = 0; r < 3; ++r) {
        RankReport rep = ProgressReport("7", 1, r, step, step);
        rep.progress.step_compute_ms = r == 2 ? slow_ms : 100;
        det_.Observe(absl::StrCat("n", r), rep);
      }
      clock_.Advance(Seconds(2));
      ASSERT_TRUE(det_.Check({&job}).empty());
    }
  };
  window(200);
  window(200);
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
  window(200);
  std::vector<RankFlag> f = det_.Stragglers("7", 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rank, 2);
  EXPECT_EQ(f[0].node, "n2");
  EXPECT_EQ(f[0].reason, "straggler: compute 2.00x the gang median over 3 windows");
  window(125);  // 1.25x, below the ratio: the span's median is still 2x
  EXPECT_EQ(det_.Stragglers("7", 1).size(), 1u);
  window(125);  // now most of the span is 1.25x
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
  window(125);
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
}

// A steady rank on a noisy machine: a stretch of contention makes it slow for
// two windows, which lifts the span's median above the ratio, but it was not
// slow in every window of the span: no flag. Slow in three in a row: flagged.
TEST_F(HangDetectorTest, StragglerMustBeSlowInEachOfKWindows) {
  JobRecord job = Running("7", 1);
  int64_t step = 0;
  auto window = [&](double slow_ms) {
    for (int i = 0; i < 5; ++i) {
      ++step;
      for (int r = 0; r < 2; ++r) {
        RankReport rep = ProgressReport("7", 1, r, step, step);
        rep.progress.step_compute_ms = r == 1 ? slow_ms : 100;
        det_.Observe(absl::StrCat("n", r), rep);
      }
      clock_.Advance(Seconds(2));
      ASSERT_TRUE(det_.Check({&job}).empty());
    }
  };
  window(100);
  window(140);
  window(140);  // the span's median is 1.4x, but the first window was 1.0x
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
  window(100);
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
  window(140);
  window(140);
  EXPECT_TRUE(det_.Stragglers("7", 1).empty());
  window(140);
  std::vector<RankFlag> f = det_.Stragglers("7", 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[0].reason, "straggler: compute 1.40x the gang median over 3 windows");
}

// A paced fleet: each node heartbeats every 15 s (the two out of phase by
// 7.5 s) while the coordinator checks every 0.5 s. A 10 s window mostly holds
// one rank's samples, so the slow rank is never slow in 3 windows running;
// windows stretched to two intervals hold both ranks' samples, and it is.
TEST_F(HangDetectorTest, WindowsShorterThanTheHeartbeatIntervalAreStretched) {
  auto run = [&](HangDetector* det) {
    JobRecord job = Running("7", 1);
    int64_t steps[2] = {0, 0};
    for (int tick = 0; tick < 2 * 120; ++tick) {  // 120 s
      for (int r = 0; r < 2; ++r) {
        if (tick % 30 != r * 15) continue;
        ++steps[r];
        RankReport rep = ProgressReport("7", 1, r, steps[r], steps[r]);
        rep.progress.step_compute_ms = r == 1 ? 200 : 100;
        det->Observe(absl::StrCat("n", r), rep);
      }
      EXPECT_TRUE(det->Check({&job}).empty());
      clock_.Advance(Millis(500));
    }
    return det->Stragglers("7", 1);
  };
  HangDetector unstretched(HangOptions(), &clock_);
  EXPECT_TRUE(run(&unstretched).empty());
  HangDetector stretched(HangOptions(), &clock_);
  stretched.SetMinWindow(Seconds(30));
  std::vector<RankFlag> f = run(&stretched);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[0].reason, "straggler: compute 2.00x the gang median over 3 windows");
}

TEST_F(HangDetectorTest, SteadyGangHasNoStraggler) {
  JobRecord job = Running("7", 1);
  for (int step = 1; step <= 200; ++step) {
    for (int r = 0; r < 2; ++r) {
      RankReport rep = ProgressReport("7", 1, r, step, step);
      rep.progress.step_compute_ms = 100 + (step * 7 + r * 13) % 25;  // +-12% jitter
      det_.Observe("n", rep);
    }
    clock_.Advance(Seconds(1));
    ASSERT_TRUE(det_.Check({&job}).empty());
    ASSERT_TRUE(det_.Stragglers("7", 1).empty()) << step;
  }
}

TEST(SuspectLedgerTest, TwoTenantsStrikesWithinTheWindowDrain) {
  FakeClock clock;
  HangOptions o;
  SuspectLedger ledger(&o, &clock);
  EXPECT_FALSE(ledger.Strike("b", "t1"));
  clock.Advance(Seconds(3601));
  EXPECT_FALSE(ledger.Strike("b", "t2"));  // the first fell out of the hour
  EXPECT_FALSE(ledger.Strike("a", "t1"));
  clock.Advance(Seconds(3599));
  EXPECT_TRUE(ledger.Strike("b", "t3"));
  o.drain_after = 0;
  EXPECT_FALSE(ledger.Strike("a", "t2"));
}

TEST(SuspectLedgerTest, OneTenantNeverDrainsANode) {
  FakeClock clock;
  HangOptions o;
  SuspectLedger ledger(&o, &clock);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(ledger.Strike("b", "t1")) << i;
  EXPECT_TRUE(ledger.Strike("b", "t2"));
  o.drain_after = 1;  // refused as a flag; the ledger still wants two tenants
  EXPECT_FALSE(ledger.Strike("a", "t1"));
  EXPECT_FALSE(ledger.Strike("a", "t1"));
}

}  // namespace
}  // namespace athanor::coord
