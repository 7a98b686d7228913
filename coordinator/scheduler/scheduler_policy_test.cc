// One test per policy rule, with exact expected placements and reasons.
#include "coordinator/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;
using testing::Where;
using std::chrono::seconds;

class PolicyTest : public ::testing::Test {
 protected:
  explicit PolicyTest(SchedulerOptions options = {}) : sched_(&clock_, options) {}
  void Add(const NodeSpec& spec) { ASSERT_TRUE(sched_.AddNode(spec).ok()); }
  void Submit(JobRequest job) { ASSERT_TRUE(sched_.Submit(std::move(job)).ok()); }
  std::vector<std::string> Reasons(const JobId& id) {
    auto why = sched_.view().Why(id);
    EXPECT_TRUE(why.ok());
    return why.ok() ? why->reasons : std::vector<std::string>{};
  }
  // Starts one job alone and checks where it went.
  void StartAlone(JobRequest job, const std::vector<std::string>& where) {
    std::string id = job.id;
    Submit(std::move(job));
    auto d = sched_.Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, id);
    EXPECT_EQ(Where(d[0]), where);
  }

  FakeClock clock_;
  Scheduler sched_;
};

TEST_F(PolicyTest, HigherPriorityFirstThenFifo) {
  Add(MakeNode("a", 4));
  Submit(MakeJob("low", 1, 4, "t", 0));
  Submit(MakeJob("hi1", 1, 4, "t", 5));
  Submit(MakeJob("hi2", 1, 4, "t", 5));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "hi1");
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"a:0,1,2,3"});
  EXPECT_EQ(sched_.view().Why("hi2")->queue_position, 1);
  EXPECT_EQ(sched_.view().Why("low")->queue_position, 2);
  ASSERT_TRUE(sched_.OnJobExited("hi1", false).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "hi2");
}

TEST_F(PolicyTest, HeldJobWaitsWithoutBlockingOthersAndStartsOnceReleased) {
  Add(MakeNode("a", 4));
  Submit(MakeJob("held", 1, 4, "t", 5));
  Submit(MakeJob("next", 1, 4, "t", 0));
  ASSERT_TRUE(sched_.SetHold("held", "waiting for checkpoint step 7 to upload").ok());
  auto d = sched_.Schedule();
  // The held job is not the head: it neither starts nor blocks a later job.
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "next");
  EXPECT_EQ(Reasons("held")[0], "waiting for checkpoint step 7 to upload");
  ASSERT_TRUE(sched_.OnJobExited("next", false).ok());
  EXPECT_TRUE(sched_.Schedule().empty());
  ASSERT_TRUE(sched_.SetHold("held", "").ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "held");
  EXPECT_TRUE(absl::IsNotFound(sched_.SetHold("nope", "x")));
}

TEST_F(PolicyTest, AvoidedNodesAreLeftOutOfPlacementAndExplained) {
  Add(MakeNode("a", 1));
  Add(MakeNode("b", 1));
  Add(MakeNode("c", 1));
  StartAlone(MakeJob("j", 2, 1), {"a:0", "b:0"});
  EXPECT_TRUE(absl::IsNotFound(sched_.SetAvoidNodes("nope", {"a"})));
  ASSERT_TRUE(sched_.SetAvoidNodes("j", {"b"}).ok());
  ASSERT_TRUE(sched_.OnJobExited("j", true).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"a:0", "c:0"}));
  // With a second node avoided only one is left: it waits, and says why.
  ASSERT_TRUE(sched_.SetAvoidNodes("j", {"b", "c"}).ok());
  ASSERT_TRUE(sched_.OnJobExited("j", true).ok());
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(Reasons("j"), (std::vector<std::string>{
                              "no node fits: needs 2 nodes with 1 free GPU each; only 1 UP node(s) could ever host a share",
                              "avoids node(s) b, c (moved off a straggler)", "position 1 of 1 in the queue"}));
  // Its queue entry is keyed by what it avoids: not changed while pending.
  EXPECT_TRUE(absl::IsFailedPrecondition(sched_.SetAvoidNodes("j", {})));
}

class StrictFairShareTest : public PolicyTest {
 protected:
  StrictFairShareTest() : PolicyTest(SchedulerOptions{.strict_fair_share = true}) {}
};

// Jobs start in submit order up to the head: the older job starts though its
// tenant uses more. Strict fair share orders every job: the later job of the
// tenant using nothing goes first, and the older one holds the reservation.
TEST_F(PolicyTest, TheOlderJobStartsFirstUnlessFairShareIsStrict) {
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict fair share" : "submit order up to the head");
    Scheduler sched(&clock_, SchedulerOptions{.strict_fair_share = strict});
    ASSERT_TRUE(sched.AddNode(MakeNode("a", 4)).ok());
    ASSERT_TRUE(sched.AddNode(MakeNode("b", 4)).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("A1", 1, 4, "A")).ok());
    ASSERT_EQ(sched.Schedule().size(), 1u);
    ASSERT_TRUE(sched.Submit(MakeJob("A2", 1, 4, "A")).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("B1", 1, 4, "B")).ok());  // later, but tenant B uses nothing
    auto d = sched.Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, strict ? "B1" : "A2");
    EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:0,1,2,3"});
    auto why = sched.view().Why(strict ? "A2" : "B1");
    ASSERT_TRUE(why.ok());
    EXPECT_EQ(why->reasons[1], "holds the reservation; starts at an unknown time (running jobs declare no time limit)");
  }
}

// The head is the class's oldest job that cannot start, whatever its
// tenant uses (strict: the job of the tenant using least); behind it fair
// share decides who gets the GPUs the head cannot use, in both.
TEST_F(PolicyTest, TheOldestBlockedJobHoldsTheReservationAndFairShareOrdersTheRest) {
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict fair share" : "submit order up to the head");
    Scheduler sched(&clock_, SchedulerOptions{.strict_fair_share = strict});
    for (const NodeSpec& node : {MakeNode("a", 4), MakeNode("b", 4), MakeNode("c", 2)}) {
      ASSERT_TRUE(sched.AddNode(node).ok());
    }
    ASSERT_TRUE(sched.Submit(MakeJob("A0", 1, 4, "A")).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("A1", 1, 4, "A")).ok());
    ASSERT_EQ(sched.Schedule().size(), 2u);  // on a and b: tenant A uses 8 GPUs
    ASSERT_TRUE(sched.Submit(MakeJob("A-big", 1, 4, "A")).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("B-big", 1, 4, "B")).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("A-small", 1, 2, "A")).ok());
    ASSERT_TRUE(sched.Submit(MakeJob("B-small", 1, 2, "B")).ok());
    auto d = sched.Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, "B-small");
    EXPECT_EQ(Where(d[0]), std::vector<std::string>{"c:0,1"});
    const JobId head = strict ? "B-big" : "A-big";
    EXPECT_EQ(sched.view().job(head)->reason.code, PendingReason::Code::kHoldsReservation);
    EXPECT_EQ(sched.view().last_pass().head, head);
    EXPECT_EQ(sched.view().job("A-small")->reason.code, PendingReason::Code::kNoFree);
  }
}

TEST_F(PolicyTest, QuotaIsAHardLimitAndExplained) {
  Add(MakeNode("a", 8));
  sched_.SetTenant("A", 4);
  StartAlone(MakeJob("A1", 1, 4, "A"), {"a:0,1,2,3"});
  Submit(MakeJob("A2", 1, 1, "A"));
  Submit(MakeJob("B1", 1, 2, "B"));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "B1");
  EXPECT_EQ(Reasons("A2"), (std::vector<std::string>{
                               "quota: tenant A uses 4 of 4 GPUs; the job needs 1",
                               "position 1 of 1 in the queue"}));
  absl::Status too_big = sched_.Submit(MakeJob("A3", 1, 5, "A"));
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_big.message(), "job A3 needs 5 GPUs but tenant A has a quota of 4");
}

TEST_F(PolicyTest, RefusesJobsThatCanNeverFit) {
  Add(MakeNode("a", 8));
  JobRequest job = MakeJob("j", 2, 4);
  job.gpu_model = "H100";
  absl::Status status = sched_.Submit(job);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "job j can never fit: it needs 2 nodes with 4 free GPUs (model H100) each; only 1 "
            "node(s) in the inventory qualify");
  EXPECT_EQ(sched_.Submit(MakeJob("z", 1, 0)).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PolicyTest, GangIsAllOrNothingAndExplained) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  StartAlone(MakeJob("small", 1, 2), {"a:0,1"});
  JobRequest gang = MakeJob("gang", 2, 4);
  gang.gpu_model = "H100";
  Submit(gang);
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(sched_.view().membership().node(1).free_gpus, 4);
  EXPECT_EQ(Reasons("gang")[0],
            "no node fits: needs 2 nodes with 4 free GPUs (model H100) each; 1 node has them free");
  ASSERT_TRUE(sched_.OnJobExited("small", false).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"a:0,1,2,3", "b:0,1,2,3"}));
}

// a: R1 (4 GPUs, ends at 100 s); b: R2 (2 GPUs, ends at 200 s); the gang G
// (2x4, top priority) is reserved for a+b at 200 s.
class BackfillTest : public PolicyTest {
 protected:
  explicit BackfillTest(SchedulerOptions options = {}) : PolicyTest(options) {}
  void SetUp() override {
    Add(MakeNode("a", 4));
    Add(MakeNode("b", 4));
    JobRequest r1 = MakeJob("R1", 1, 4);
    r1.time_limit = seconds(100);
    StartAlone(r1, {"a:0,1,2,3"});
    JobRequest r2 = MakeJob("R2", 1, 2);
    r2.time_limit = seconds(200);
    StartAlone(r2, {"b:0,1"});
    Submit(MakeJob("G", 2, 4, "t", 10));
  }
  JobRequest Small(const std::string& id, int64_t limit_s, bool preemptible) {
    JobRequest job = MakeJob(id, 1, 2);
    job.time_limit = seconds(limit_s);
    job.preemptible = preemptible;
    return job;
  }
};

TEST_F(BackfillTest, JobEndingBeforeTheReservationBackfills) {
  Submit(Small("S1", 150, false));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "S1");
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:2,3"});
  ASSERT_TRUE(sched_.view().last_pass().reservation.has_value());
  EXPECT_EQ(sched_.view().last_pass().reservation->job, "G");
  EXPECT_EQ(sched_.view().last_pass().reservation->start, TimePoint{} + seconds(200));
  EXPECT_EQ(Reasons("G")[1], "holds the reservation; starts in 200 s");
}

// The reservation follows the holders' ends as they change: a preemption
// deadline sooner than a time limit, a holder that exits, and an end already
// past (counted as now).
TEST_F(BackfillTest, TheReservationFollowsTheHoldersEnds) {
  auto start = [&] {
    sched_.Schedule();
    const auto& r = sched_.view().last_pass().reservation;
    EXPECT_TRUE(r.has_value() && r->job == "G" && r->finite);
    return r.has_value() ? r->start - TimePoint{} : Duration::zero();
  };
  EXPECT_EQ(start(), seconds(200));  // R2's limit
  ASSERT_TRUE(sched_.MarkPreempting("R2", TimePoint{} + seconds(50)).ok());
  EXPECT_EQ(start(), seconds(100));  // now R1's limit
  ASSERT_TRUE(sched_.OnJobExited("R1", false).ok());
  EXPECT_EQ(start(), seconds(50));  // R2's deadline
  clock_.Advance(seconds(80));
  EXPECT_EQ(start(), seconds(80));  // R2 is late: it may end any moment
  ASSERT_TRUE(sched_.OnJobExited("R2", false).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "G");
}

TEST_F(BackfillTest, LongJobWaitsBehindTheReservation) {
  Submit(Small("S2", 300, false));
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(Reasons("S2"), (std::vector<std::string>{
                               "waiting behind the reservation for job G (starts in 200 s)",
                               "position 2 of 2 in the queue"}));
}

TEST_F(BackfillTest, PreemptibleBorrowerIsPreemptedWhenTheGangCanStart) {
  Submit(Small("S3", 0, true));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:2,3"});
  EXPECT_EQ(sched_.view().job("S3")->borrowed_from, "G");
  clock_.Advance(seconds(100));
  ASSERT_TRUE(sched_.OnJobExited("R1", false).ok());
  EXPECT_TRUE(sched_.Schedule().empty());  // b still holds R2
  clock_.Advance(seconds(100));
  ASSERT_TRUE(sched_.OnJobExited("R2", false).ok());
  d = sched_.Schedule();  // S3 runs 200 s < min run time, but it borrowed
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "S3");
  EXPECT_EQ(d[0].grace, seconds(60));
  EXPECT_TRUE(sched_.Schedule().empty());  // its GPUs are free only at exit
  EXPECT_EQ(Reasons("G")[0], "waiting for preempted job(s) S3 to exit");
  ASSERT_TRUE(sched_.OnJobExited("S3", true).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "G");
  EXPECT_EQ(Where(d[0]), (std::vector<std::string>{"a:0,1,2,3", "b:0,1,2,3"}));
}

TEST_F(PolicyTest, UnknownReservationHoldsFreedGpusForTheGang) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  StartAlone(MakeJob("R1", 1, 4), {"a:0,1,2,3"});  // no time limits: never end
  StartAlone(MakeJob("R2", 1, 2), {"b:0,1"});
  Add(MakeNode("c", 2));
  Submit(MakeJob("G", 2, 4, "t", 10));
  Submit(MakeJob("S", 1, 2));  // best fit would be b, but b's free GPUs are G's
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"c:0,1"});
  ASSERT_TRUE(sched_.view().last_pass().reservation.has_value());
  EXPECT_FALSE(sched_.view().last_pass().reservation->finite);
  EXPECT_EQ(sched_.view().last_pass().reservation->nodes, (std::vector<int>{0, 1}));
  Submit(MakeJob("S2", 1, 2));
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(Reasons("S2")[0],
            "waiting behind the reservation for job G (starts at an unknown time (running jobs "
            "declare no time limit))");
  JobRequest limited = MakeJob("S3", 1, 2);
  limited.time_limit = seconds(50);  // ends before an unknown start: may use b
  Submit(limited);
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "S3");
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:2,3"});
}

// While the head waits for its victims, a shape that failed within the
// reservation's slack is skipped whole, unless one of its jobs ends before
// the reservation and may take what is free; Why() still says why.
TEST_F(PolicyTest, JobsThatCanOnlyWaitBehindTheReservationAreNotVisited) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  JobRequest low = MakeJob("L", 1, 4);
  low.preemptible = true;
  StartAlone(low, {"a:0,1,2,3"});
  clock_.Advance(seconds(300));  // past the minimum run time
  Submit(MakeJob("H", 2, 4, "t", 1));
  for (const char* id : {"S1", "S2", "S3", "S4", "S5"}) Submit(MakeJob(id, 1, 2));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "L");
  EXPECT_EQ(sched_.view().last_pass().visited, 2u);  // H, then S1; S2-S5 skipped
  for (const char* id : {"S1", "S3"}) {
    EXPECT_EQ(Reasons(id)[0], "waiting behind the reservation for job H (starts in 60 s)") << id;
  }
  // A job of the same shape that ends before the reservation may use b.
  JobRequest shorter = MakeJob("T", 1, 2);
  shorter.time_limit = seconds(30);
  Submit(shorter);
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "T");
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:0,1"});
  EXPECT_EQ(sched_.view().last_pass().visited, 7u);
}

TEST_F(StrictFairShareTest, ShareWeightsSkewFairShare) {
  Add(MakeNode("a", 8));
  sched_.SetTenant("big", -1, 4);
  StartAlone(MakeJob("b1", 1, 2, "big"), {"a:0,1"});
  StartAlone(MakeJob("s1", 1, 1, "small"), {"a:2"});
  // big: 2 GPUs / share 4 = 0.5 < small: 1 / 1.
  Submit(MakeJob("s2", 1, 5, "small"));
  Submit(MakeJob("b2", 1, 5, "big"));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "b2");
}

TEST_F(PolicyTest, DownNodesGetNoJobs) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  ASSERT_TRUE(sched_.SetNodeState("a", MemberState::kDown).ok());
  StartAlone(MakeJob("j", 1, 4), {"b:0,1,2,3"});
}

class StrictOrderTest : public BackfillTest {
 protected:
  StrictOrderTest() : BackfillTest(SchedulerOptions{.backfill = false}) {}
};

TEST_F(StrictOrderTest, NothingPassesTheBlockedHead) {
  Submit(Small("S1", 150, false));
  EXPECT_TRUE(sched_.Schedule().empty());
  EXPECT_EQ(Reasons("S1")[0], "waiting behind blocked job G (backfill is off)");
}

TEST_F(PolicyTest, PreemptsTheVictimWithLeastLostWorkOnlyOnce) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  JobRequest l1 = MakeJob("L1", 1, 4, "t", 0);
  l1.preemptible = true;
  StartAlone(l1, {"a:0,1,2,3"});
  JobRequest l2 = l1;
  l2.id = "L2";
  l2.submit_seq = 0;
  StartAlone(l2, {"b:0,1,2,3"});
  clock_.Advance(seconds(400));
  ASSERT_TRUE(sched_.OnCheckpoint("L1", TimePoint{} + seconds(390)).ok());
  ASSERT_TRUE(sched_.OnCheckpoint("L2", TimePoint{} + seconds(100)).ok());
  JobRequest h = MakeJob("H", 1, 4, "t", 9);
  h.grace = seconds(30);
  Submit(h);
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "L1");
  EXPECT_EQ(d[0].grace, seconds(60));  // the victim's grace (default)
  EXPECT_EQ(sched_.view().job("L1")->state, QueuedJobState::kPreempting);
  EXPECT_TRUE(sched_.Schedule().empty());  // no second victim
  ASSERT_TRUE(sched_.OnJobExited("L1", true).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "H");
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"a:0,1,2,3"});
  EXPECT_EQ(sched_.view().job("L1")->req.submit_seq, 1u);  // requeued in its original order
  EXPECT_EQ(sched_.view().Why("L1")->queue_position, 1);
}

TEST_F(PolicyTest, MinimumRunTimeProtectsFreshJobs) {
  Add(MakeNode("a", 4));
  JobRequest l1 = MakeJob("L1", 1, 4, "t", 0);
  l1.preemptible = true;
  StartAlone(l1, {"a:0,1,2,3"});
  clock_.Advance(seconds(299));
  Submit(MakeJob("H", 1, 4, "t", 9));
  EXPECT_TRUE(sched_.Schedule().empty());
  clock_.Advance(seconds(1));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
}

// The GPUs a victim frees are the head's: while the head waits for the jobs it
// preempted, no preemptible job borrows them (it would be preempted again, run
// time or not, as soon as the last victim exits).
TEST_F(PolicyTest, GpusFreedByPreemptionAreNotBorrowed) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  auto low = [](const std::string& id) {
    JobRequest job = MakeJob(id, 1, 4, "t", 0);
    job.preemptible = true;
    return job;
  };
  StartAlone(low("L1"), {"a:0,1,2,3"});
  StartAlone(low("L2"), {"b:0,1,2,3"});
  clock_.Advance(seconds(400));  // both past the minimum run time
  Submit(low("P"));
  Submit(MakeJob("H", 2, 4, "t", 10));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[1].kind, Decision::Kind::kPreempt);
  clock_.Advance(seconds(1));
  ASSERT_TRUE(sched_.OnJobExited("L1", true).ok());  // a is free; b still PREEMPTING
  d = sched_.Schedule();
  for (const Decision& x : d) {
    ADD_FAILURE() << (x.kind == Decision::Kind::kStart ? "started " : "preempted ") << x.job;
  }
  EXPECT_EQ(Reasons("H")[0], "waiting for preempted job(s) L2 to exit");
  EXPECT_EQ(sched_.view().membership().node(0).free_gpus, 4);
  clock_.Advance(seconds(1));
  ASSERT_TRUE(sched_.OnJobExited("L2", true).ok());
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u) << (d.size() > 1 ? d[0].job + ", " + d[1].job : "");
  EXPECT_EQ(d[0].kind, Decision::Kind::kStart);
  EXPECT_EQ(d[0].job, "H");
}

// A borrower may be preempted young only by the head it borrowed from; for
// any other job it is an ordinary one, protected by the minimum run time.
TEST_F(PolicyTest, OnlyTheLenderPreemptsABorrowerBeforeItsMinimumRunTime) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  StartAlone(MakeJob("R1", 1, 4), {"a:0,1,2,3"});  // no time limits: never end
  StartAlone(MakeJob("R2", 1, 2), {"b:0,1"});
  Submit(MakeJob("A", 2, 4, "t", 5));
  JobRequest p = MakeJob("P", 1, 2);
  p.preemptible = true;
  Submit(p);
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(Where(d[0]), std::vector<std::string>{"b:2,3"});
  EXPECT_EQ(sched_.view().job("P")->borrowed_from, "A");
  // A steps aside (held); B, another head that P's GPUs would let start, may
  // not take them before P has run the minimum run time.
  ASSERT_TRUE(sched_.SetHold("A", "waiting for an upload").ok());
  Submit(MakeJob("B", 1, 2, "u", 5));
  clock_.Advance(seconds(1));
  d = sched_.Schedule();
  for (const Decision& x : d) {
    ADD_FAILURE() << (x.kind == Decision::Kind::kStart ? "started " : "preempted ") << x.job;
  }
  clock_.Advance(seconds(299));
  d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "P");
}

TEST_F(PolicyTest, NodeDownKeepsGpusHeldUntilTheJobExits) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  StartAlone(MakeJob("j", 2, 2), {"a:0,1", "b:0,1"});
  auto jobs = sched_.SetNodeState("a", MemberState::kDown);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(*jobs, std::vector<JobId>{"j"});
  Submit(MakeJob("k", 1, 4));
  EXPECT_TRUE(sched_.Schedule().empty());  // b's GPUs 0,1 still held by j
  ASSERT_TRUE(sched_.OnJobExited("j", true).ok());
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "k");  // j needs 2 nodes; only b is UP
  EXPECT_EQ(Reasons("j")[0],
            "no node fits: needs 2 nodes with 2 free GPUs each; only 1 UP node(s) could ever host "
            "a share");
}

TEST_F(PolicyTest, RestoreRebuildsARunningJob) {
  Add(MakeNode("a", 4));
  JobRequest j = MakeJob("j", 1, 2);
  j.submit_seq = 7;
  ASSERT_TRUE(sched_.Restore(j, {{"a", {1, 3}}}, TimePoint{}, std::nullopt).ok());
  JobRequest k = MakeJob("k", 1, 2);
  EXPECT_EQ(sched_.Restore(k, {{"a", {3, 0}}}, TimePoint{}, std::nullopt).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sched_.view().membership().node(0).free_gpus, 2);
  StartAlone(k, {"a:0,2"});
  EXPECT_EQ(sched_.view().job("k")->req.submit_seq, 8u);
  Add(MakeNode("b", 4));
  ASSERT_TRUE(sched_.Restore(MakeJob("p", 1, 4), {{"b", {0, 1, 2, 3}}}, TimePoint{}, std::nullopt,
                             TimePoint{} + seconds(60))
                  .ok());
  EXPECT_EQ(sched_.view().job("p")->state, QueuedJobState::kPreempting);
  Submit(MakeJob("w", 1, 4, "t", 5));
  EXPECT_TRUE(sched_.Schedule().empty());  // waits for p; preempts nothing more
  EXPECT_EQ(Reasons("w")[0], "waiting for preempted job(s) p to exit");
  clock_.Advance(seconds(10));
  EXPECT_DOUBLE_EQ(sched_.view().accounting().JobGpuSeconds("j", clock_.Now()), 20.0);
}

TEST_F(PolicyTest, APassSkipsJobsOfAShapeThatCanNoLongerBePlaced) {
  Add(MakeNode("a", 4));
  Add(MakeNode("b", 4));
  StartAlone(MakeJob("big", 1, 4, "t"), {"a:0,1,2,3"});
  StartAlone(MakeJob("half", 1, 2, "t"), {"b:0,1"});
  // 1,000 jobs that need a whole free node (none is): the first becomes the
  // head, the rest of its shape are not even looked at. The 1-GPU jobs queued
  // behind them still start on b's two free GPUs.
  for (int i = 0; i < 1000; ++i) Submit(MakeJob(absl::StrCat("w", i), 1, 4, "t"));
  Submit(MakeJob("s1", 1, 1, "t"));
  Submit(MakeJob("s2", 1, 1, "t"));
  Submit(MakeJob("s3", 1, 1, "t"));
  auto d = sched_.Schedule();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].job, "s1");
  EXPECT_EQ(d[1].job, "s2");
  // w0 (head), s1, s2, s3: looked at; w1..w999: skipped.
  EXPECT_EQ(sched_.view().last_pass().visited, 4u);
  EXPECT_EQ(Reasons("w0")[0], "no node fits: needs 1 node with 4 free GPUs; 0 nodes have them free");
  // A skipped job's reason is worked out when asked, the same as if visited.
  EXPECT_EQ(Reasons("w500"),
            (std::vector<std::string>{"no node fits: needs 1 node with 4 free GPUs; 0 nodes have them free",
                                      "position 501 of 1001 in the queue"}));
  EXPECT_EQ(Reasons("s3")[0], "no node fits: needs 1 node with 1 free GPU; 0 nodes have them free");
}

}  // namespace
}  // namespace athanor::sched
