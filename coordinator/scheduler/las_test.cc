// The FIFO and least-attained-service orders (SchedulerOptions::policy), with
// exact decisions.
#include "coordinator/scheduler/las.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using std::chrono::seconds;
using testing::MakeJob;
using testing::MakeNode;

TEST(LasQueueTest, ThresholdsAndForgiveness) {
  LasOptions o;
  o.thresholds_gpu_s = {100, 1000};
  QueuedJob job;
  job.req = MakeJob("j", 1, 2);  // 2 GPUs
  EXPECT_EQ(LasQueue(o, job, 0), 0);
  EXPECT_EQ(LasQueue(o, job, 99.9), 0);
  EXPECT_EQ(LasQueue(o, job, 100), 1);
  EXPECT_EQ(LasQueue(o, job, 999.9), 1);
  EXPECT_EQ(LasQueue(o, job, 5000), 2);
  job.las_forgiven_gpu_s = 4950;
  EXPECT_EQ(LasQueue(o, job, 5000), 0);
  EXPECT_EQ(LasQueue(o, job, 5050), 1);
}

TEST(SchedulingPolicyTest, Names) {
  EXPECT_EQ(ParseSchedulingPolicy("las"), SchedulingPolicy::kLas);
  EXPECT_EQ(ParseSchedulingPolicy("default"), SchedulingPolicy::kDefault);
  EXPECT_EQ(ParseSchedulingPolicy("fifo"), SchedulingPolicy::kFifo);
  EXPECT_EQ(ParseSchedulingPolicy("LAS"), std::nullopt);
  EXPECT_STREQ(SchedulingPolicyName(SchedulingPolicy::kLas), "las");
}

class OrderTest : public ::testing::Test {
 protected:
  static SchedulerOptions Options(SchedulingPolicy policy) {
    SchedulerOptions o;
    o.policy = policy;
    o.min_run_time = seconds(0);
    o.las.thresholds_gpu_s = {50};
    return o;
  }
  // One 1-GPU node; `old` ran 100 s (100 GPU-s) and was requeued; `fresh`
  // is submitted after it. Returns the first pass's decisions.
  std::vector<Decision> RequeuedThenFresh(SchedulingPolicy policy) {
    sched_ = std::make_unique<Scheduler>(&clock_, Options(policy));
    EXPECT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    EXPECT_TRUE(sched_->Submit(MakeJob("old", 1, 1)).ok());
    EXPECT_EQ(sched_->Schedule().size(), 1u);
    clock_.Advance(seconds(100));
    EXPECT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());
    EXPECT_TRUE(sched_->Submit(MakeJob("fresh", 1, 1)).ok());
    return sched_->Schedule();
  }

  // Under LAS on one 1-GPU node, preemptible "old" has run 100 s (queue 1).
  void OldRunningInQueue1() {
    sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    JobRequest old = MakeJob("old", 1, 1);
    old.preemptible = true;
    ASSERT_TRUE(sched_->Submit(old).ok());
    ASSERT_EQ(sched_->Schedule().size(), 1u);
    clock_.Advance(seconds(100));
  }

  // On one 1-GPU node under `o` (LAS): preemptible "old" runs 400 s and
  // checkpoints, preemptible "fresh" preempts it for order, "old" is
  // requeued and "fresh" starts.
  void OldLendsItsGpuToFresh(const SchedulerOptions& o) {
    using Kind = Decision::Kind;
    sched_ = std::make_unique<Scheduler>(&clock_, o);
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("old"));
    ASSERT_EQ(sched_->Schedule().size(), 1u);
    clock_.Advance(seconds(400));
    ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("fresh"));
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "old"));
    ASSERT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "fresh"));
  }

  void SubmitPreemptible(const char* id, int priority = 0) {
    JobRequest r = MakeJob(id, 1, 1, "t", priority);
    r.preemptible = true;
    ASSERT_TRUE(sched_->Submit(r).ok());
  }
  // A pass that decides exactly one thing: `kind` for `id`.
  void ExpectOnly(Decision::Kind kind, const char* id) {
    auto d = sched_->Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].kind, kind);
    EXPECT_EQ(d[0].job, id);
  }

  FakeClock clock_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(OrderTest, EveryPolicyReturnsARequeuedJobAheadOfNewerOnes) {
  // Under LAS the service of a job requeued by a failure is forgiven: it did
  // not choose to stop, and waiting behind every newer job would starve it.
  for (SchedulingPolicy p : {SchedulingPolicy::kDefault, SchedulingPolicy::kFifo, SchedulingPolicy::kLas}) {
    auto d = RequeuedThenFresh(p);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, "old") << SchedulingPolicyName(p);
  }
}

TEST_F(OrderTest, FifoIgnoresPriorityAndNeverPreemptsForIt) {
  sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kFifo));
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
  JobRequest low = MakeJob("low", 1, 1, "t", 0);
  low.preemptible = true;
  ASSERT_TRUE(sched_->Submit(low).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("high", 1, 1, "t", 5)).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "low");
  clock_.Advance(seconds(1000));
  EXPECT_TRUE(sched_->Schedule().empty());
}

TEST_F(OrderTest, LasPreemptsAHigherQueueOnlyJustAfterItsCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(OldRunningInQueue1());
  ASSERT_TRUE(sched_->Submit(MakeJob("fresh", 1, 1)).ok());
  EXPECT_TRUE(sched_->Schedule().empty());  // no checkpoint yet: it would lose 100 s

  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  clock_.Advance(seconds(301));  // past the 300 s window
  EXPECT_TRUE(sched_->Schedule().empty());

  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  EXPECT_EQ(d[0].job, "old");
}

// A job preempted for LAS order comes back ahead of jobs submitted after it,
// and is never preempted for order again (LasOptions::max_order_preemptions).
TEST_F(OrderTest, LasPreemptsAJobForOrderOnceAndItReturnsFirst) {
  ASSERT_NO_FATAL_FAILURE(OldRunningInQueue1());
  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("fresh", 1, 1)).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Decision::Kind::kPreempt);
  ASSERT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("newer", 1, 1)).ok());
  d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "fresh");
  EXPECT_EQ(LasQueue(Options(SchedulingPolicy::kLas).las, *sched_->view().job("old"), 100), 0);

  clock_.Advance(seconds(10));
  ASSERT_TRUE(sched_->OnJobExited("fresh", /*requeue=*/false).ok());
  d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "old");  // ahead of "newer", though it has received more
  clock_.Advance(seconds(100));  // queue 1 again, just after a checkpoint
  ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
  EXPECT_TRUE(sched_->Schedule().empty());  // once is its limit: "newer" waits
  EXPECT_EQ(sched_->view().job("newer")->reason.code, PendingReason::Code::kHoldsReservation);
}

// A job preempted for LAS order takes its GPUs back once it has waited
// LasOptions::recall_after, from the job of its class that started since,
// before that job's minimum run time and without its checkpoint; it does not
// preempt for order in the meantime, and the job it recalled cannot recall
// from it in turn.
TEST_F(OrderTest, LasRecallsThePreemptedJobsGpusAfterRecallAfter) {
  using Kind = Decision::Kind;
  for (int recall_s : {60, 0}) {
    SCOPED_TRACE(absl::StrCat("recall_after ", recall_s, " s"));
    SchedulerOptions o = Options(SchedulingPolicy::kLas);
    o.min_run_time = seconds(300);
    o.las.recall_after = seconds(recall_s);
    ASSERT_NO_FATAL_FAILURE(OldLendsItsGpuToFresh(o));

    // 59 s on, "fresh" is in queue 1 and has just checkpointed, "old" is in
    // queue 0: order alone would preempt "fresh" now if min_run_time allowed.
    clock_.Advance(seconds(59));
    ASSERT_TRUE(sched_->OnCheckpoint("fresh", clock_.Now()).ok());
    EXPECT_TRUE(sched_->Schedule().empty());
    EXPECT_EQ(sched_->view().job("old")->reason.code, PendingReason::Code::kHoldsReservation);
    clock_.Advance(seconds(1));
    if (recall_s == 0) {  // off: "old" waits for "fresh" to end
      EXPECT_TRUE(sched_->Schedule().empty());
      EXPECT_EQ(sched_->view().job("old")->reason.code, PendingReason::Code::kHoldsReservation);
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "fresh"));
    EXPECT_EQ(sched_->view().job("old")->reason.code, PendingReason::Code::kWaitingPreemption);
    ASSERT_TRUE(sched_->OnJobExited("fresh", /*requeue=*/true).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "old"));

    // "fresh" may recall from jobs started since, but "old" was preempted
    // for order once already.
    clock_.Advance(seconds(600));
    ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
    EXPECT_TRUE(sched_->Schedule().empty());
    EXPECT_EQ(sched_->view().job("fresh")->reason.code, PendingReason::Code::kHoldsReservation);
  }
}

// A restarted coordinator gives each job its QueueMarks back (Submit for a
// pending job, Restore for a running one): the job preempted for order still
// recalls its GPUs 60 s after it was requeued, not 60 s after the restart,
// and the running job keeps its count of preemptions for order.
TEST_F(OrderTest, LasMarksSurviveARestart) {
  using Kind = Decision::Kind;
  SchedulerOptions o = Options(SchedulingPolicy::kLas);
  o.min_run_time = seconds(300);
  ASSERT_NO_FATAL_FAILURE(OldLendsItsGpuToFresh(o));
  const TimePoint requeued = clock_.Now();  // "old" was requeued at this instant
  const QueuedJob& old = *sched_->view().job("old");
  const QueuedJob& fresh = *sched_->view().job("fresh");
  ASSERT_EQ(old.marks().queued_at, std::optional<TimePoint>(requeued));
  EXPECT_EQ(old.marks().order_preemptions, 1);
  EXPECT_EQ(old.marks().las_behind_seq, fresh.req.submit_seq);
  EXPECT_TRUE(old.marks().las_recalls);
  EXPECT_EQ(fresh.marks().queued_at, std::nullopt);  // not pending

  clock_.Advance(seconds(30));  // the coordinator restarts: once with the marks, once without
  Scheduler with(&clock_, o), without(&clock_, o);
  for (Scheduler* restarted : {&with, &without}) {
    const bool marks = restarted == &with;
    ASSERT_TRUE(restarted->AddNode(MakeNode("n1", 1)).ok());
    ASSERT_TRUE(restarted->Restore(fresh.req, {{"n1", {0}}}, fresh.started, std::nullopt, std::nullopt,
                                   marks ? fresh.marks() : QueueMarks{}).ok());
    ASSERT_TRUE(restarted->Submit(old.req, marks ? old.marks() : QueueMarks{}).ok());
  }
  EXPECT_EQ(with.view().job("old")->queued_at, requeued);
  EXPECT_EQ(without.view().job("old")->queued_at, clock_.Now());
  EXPECT_EQ(with.view().job("fresh")->order_preemptions, 0);
  clock_.Advance(seconds(29));
  for (Scheduler* restarted : {&with, &without}) {
    ASSERT_TRUE(restarted->OnCheckpoint("fresh", clock_.Now()).ok());
    EXPECT_TRUE(restarted->Schedule().empty());
  }
  clock_.Advance(seconds(1));  // "old" has waited 60 s since its requeue
  auto d = with.Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Kind::kPreempt);
  EXPECT_EQ(d[0].job, "fresh");
  EXPECT_TRUE(without.Schedule().empty());  // it forgot the loan: no recall
}

// A running job restored with its preemption for order spent is not
// preempted for order again; one restored without marks is.
TEST_F(OrderTest, LasRestoredJobKeepsItsPreemptionsForOrder) {
  for (int spent : {1, 0}) {
    SCOPED_TRACE(absl::StrCat(spent, " preemptions for order"));
    sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    JobRequest old = MakeJob("old", 1, 1);
    old.preemptible = true;
    old.submit_seq = 7;
    QueueMarks marks;
    marks.order_preemptions = spent;
    // It has run 100 s (queue 1) and checkpointed just now.
    ASSERT_TRUE(sched_->Restore(old, {{"n1", {0}}}, clock_.Now() - seconds(100), clock_.Now(), std::nullopt,
                                marks).ok());
    EXPECT_EQ(sched_->view().job("old")->order_preemptions, spent);
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("fresh"));
    if (spent == 1) {
      EXPECT_TRUE(sched_->Schedule().empty());
    } else {
      ASSERT_NO_FATAL_FAILURE(ExpectOnly(Decision::Kind::kPreempt, "old"));
    }
  }
}

// A recall takes only from jobs that started after the recalling job was
// requeued, and only of its own class.
TEST_F(OrderTest, LasRecallsNeitherFromEarlierJobsNorFromOtherClasses) {
  using Kind = Decision::Kind;
  for (bool higher_class_takes_it : {false, true}) {
    SCOPED_TRACE(higher_class_takes_it ? "a higher class took the GPU" : "its preemptor holds the GPU");
    sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 2)).ok());
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("old"));
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("early"));
    ASSERT_EQ(sched_->Schedule().size(), 2u);
    clock_.Advance(seconds(100));
    ASSERT_TRUE(sched_->OnCheckpoint("old", clock_.Now()).ok());
    ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("fresh"));
    // "early" has no checkpoint: "old" goes.
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "old"));
    ASSERT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "fresh"));
    if (higher_class_takes_it) {
      ASSERT_TRUE(sched_->OnJobExited("fresh", /*requeue=*/false).ok());
      ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("high", 5));
      ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "high"));  // ahead of "old"
    }
    // "early" has just checkpointed and would lose nothing, but it started
    // before "old" was requeued.
    clock_.Advance(seconds(60));
    ASSERT_TRUE(sched_->OnCheckpoint("early", clock_.Now()).ok());
    if (higher_class_takes_it) {
      EXPECT_TRUE(sched_->Schedule().empty());
      EXPECT_EQ(sched_->view().job("old")->reason.code, PendingReason::Code::kHoldsReservation);
    } else {
      ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "fresh"));
    }
  }
}

// A job already preempted for order as often as LasOptions allows is
// recalled once more, only by a recalling job submitted before it.
TEST_F(OrderTest, LasRecallsOnceMoreOnlyFromANewerJob) {
  using Kind = Decision::Kind;
  sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
  ASSERT_TRUE(sched_->AddNode(MakeNode("n2", 1)).ok());
  ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("older"));
  ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("newer"));
  ASSERT_EQ(sched_->Schedule().size(), 2u);
  clock_.Advance(seconds(400));
  // "taker", which nothing may preempt, takes the GPU of "older"; "older"
  // is held meanwhile, so that the rest happens before it recalls.
  ASSERT_TRUE(sched_->OnCheckpoint("older", clock_.Now()).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("taker", 1, 1)).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "older"));
  ASSERT_TRUE(sched_->OnJobExited("older", /*requeue=*/true).ok());
  ASSERT_TRUE(sched_->SetHold("older", "test").ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "taker"));
  // "newer" is preempted for order by "third", and recalls from it.
  ASSERT_TRUE(sched_->OnCheckpoint("newer", clock_.Now()).ok());
  ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("third"));
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "newer"));
  ASSERT_TRUE(sched_->OnJobExited("newer", /*requeue=*/true).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "third"));
  clock_.Advance(seconds(60));
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "third"));
  ASSERT_TRUE(sched_->OnJobExited("third", /*requeue=*/true).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "newer"));
  ASSERT_TRUE(sched_->Cancel("third").ok());
  EXPECT_EQ(sched_->view().job("newer")->order_preemptions, 1);

  // "older" has waited 60 s: of the jobs started since, "taker" may not be
  // preempted, and "newer", once preempted for order, is newer than it.
  ASSERT_TRUE(sched_->SetHold("older", "").ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kPreempt, "newer"));
  ASSERT_TRUE(sched_->OnJobExited("newer", /*requeue=*/true).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Kind::kStart, "older"));
  EXPECT_EQ(sched_->view().job("newer")->order_preemptions, 2);
  // "newer" may not take it back in turn.
  clock_.Advance(seconds(600));
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->view().job("newer")->reason.code, PendingReason::Code::kHoldsReservation);
}

// A job whose node goes DOWN recalls as one preempted for order does.
TEST_F(OrderTest, LasJobOfALostNodeRecallsItsGpus) {
  sched_ = std::make_unique<Scheduler>(&clock_, Options(SchedulingPolicy::kLas));
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
  ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("hit"));
  ASSERT_EQ(sched_->Schedule().size(), 1u);
  clock_.Advance(seconds(100));
  auto holders = sched_->SetNodeState("n1", MemberState::kDown);
  ASSERT_TRUE(holders.ok());
  EXPECT_EQ(*holders, std::vector<JobId>{"hit"});
  ASSERT_TRUE(sched_->OnJobExited("hit", /*requeue=*/true).ok());
  EXPECT_TRUE(sched_->view().job("hit")->las_recalls);
  // Held while a newer job takes the only GPU left.
  ASSERT_TRUE(sched_->SetHold("hit", "test").ok());
  ASSERT_TRUE(sched_->AddNode(MakeNode("n2", 1)).ok());
  ASSERT_NO_FATAL_FAILURE(SubmitPreemptible("later"));
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Decision::Kind::kStart, "later"));
  ASSERT_TRUE(sched_->SetHold("hit", "").ok());
  clock_.Advance(seconds(59));
  EXPECT_TRUE(sched_->Schedule().empty());
  clock_.Advance(seconds(1));
  ASSERT_NO_FATAL_FAILURE(ExpectOnly(Decision::Kind::kPreempt, "later"));
}

// Under the default policy and LAS, a job pending for
// SchedulerOptions::age_limit goes ahead of every class: it gets the
// reservation, though it preempts no one for it.
TEST_F(OrderTest, AJobWaitingPastTheAgeLimitGoesAheadOfHigherClasses) {
  for (SchedulingPolicy p : {SchedulingPolicy::kDefault, SchedulingPolicy::kLas}) {
    SCOPED_TRACE(SchedulingPolicyName(p));
    SchedulerOptions o = Options(p);
    o.age_limit = seconds(3600);
    sched_ = std::make_unique<Scheduler>(&clock_, o);
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 1)).ok());
    ASSERT_TRUE(sched_->Submit(MakeJob("running", 1, 1)).ok());
    ASSERT_EQ(sched_->Schedule().size(), 1u);
    ASSERT_TRUE(sched_->Submit(MakeJob("low", 1, 1, "t", 0)).ok());
    clock_.Advance(seconds(1800));
    ASSERT_TRUE(sched_->Submit(MakeJob("high", 1, 1, "t", 5)).ok());
    EXPECT_TRUE(sched_->Schedule().empty());
    EXPECT_EQ(sched_->view().job("high")->reason.code, PendingReason::Code::kHoldsReservation);
    clock_.Advance(seconds(1799));
    EXPECT_TRUE(sched_->Schedule().empty());
    EXPECT_EQ(sched_->view().job("high")->reason.code, PendingReason::Code::kHoldsReservation);
    clock_.Advance(seconds(1));  // "low" has waited an hour
    EXPECT_TRUE(sched_->Schedule().empty());
    EXPECT_EQ(sched_->view().job("low")->reason.code, PendingReason::Code::kHoldsReservation);
    ASSERT_TRUE(sched_->OnJobExited("running", /*requeue=*/false).ok());
    auto d = sched_->Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, "low");
  }
}

// Strict fair share serves the tenant using least first, so a busy
// tenant's job could wait for ever; past the age limit it goes first.
TEST_F(OrderTest, DefaultPutsAJobWaitingPastTheAgeLimitAheadOfFairShare) {
  SchedulerOptions o = Options(SchedulingPolicy::kDefault);
  o.strict_fair_share = true;
  o.age_limit = seconds(3600);
  sched_ = std::make_unique<Scheduler>(&clock_, o);
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 2)).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("a-run", 1, 1, "a")).ok());
  ASSERT_EQ(sched_->Schedule().size(), 1u);
  ASSERT_TRUE(sched_->Submit(MakeJob("a-wait", 1, 2, "a")).ok());
  clock_.Advance(seconds(1800));
  ASSERT_TRUE(sched_->Submit(MakeJob("b-wait", 1, 2, "b")).ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  // Tenant b uses nothing, a one GPU: b's newer job is the head.
  EXPECT_EQ(sched_->view().job("b-wait")->reason.code, PendingReason::Code::kHoldsReservation);
  clock_.Advance(seconds(1800));
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->view().job("a-wait")->reason.code, PendingReason::Code::kHoldsReservation);
  ASSERT_TRUE(sched_->OnJobExited("a-run", /*requeue=*/false).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "a-wait");
}

// Strict fair share would hand the head's place to another tenant's job as
// soon as that tenant uses less; with keep_head the default keeps the head,
// so its reserved GPUs do not drain for one gang and then go to another.
// Without it, the place moves.
TEST_F(OrderTest, DefaultHeadKeepsItsPlaceWhileFairShareShifts) {
  for (bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "keep_head" : "no keep_head");
    SchedulerOptions o = Options(SchedulingPolicy::kDefault);
    o.strict_fair_share = true;
    o.keep_head = keep;
    sched_ = std::make_unique<Scheduler>(&clock_, o);
    ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 4)).ok());
    ASSERT_TRUE(sched_->AddNode(MakeNode("n2", 1)).ok());
    ASSERT_TRUE(sched_->Submit(MakeJob("a-run", 1, 1, "a")).ok());
    auto d = sched_->Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(testing::Where(d[0]), std::vector<std::string>{"n2:0"});
    ASSERT_TRUE(sched_->Submit(MakeJob("b-run", 1, 2, "b")).ok());
    ASSERT_TRUE(sched_->Submit(MakeJob("c-run", 1, 1, "c")).ok());
    ASSERT_EQ(sched_->Schedule().size(), 2u);  // both on n1
    ASSERT_TRUE(sched_->Submit(MakeJob("a-big", 1, 4, "a")).ok());
    ASSERT_TRUE(sched_->Submit(MakeJob("b-big", 1, 4, "b")).ok());
    EXPECT_TRUE(sched_->Schedule().empty());  // a uses 1 GPU, b 2: a's job is the head
    EXPECT_EQ(sched_->view().job("a-big")->reason.code, PendingReason::Code::kHoldsReservation);
    ASSERT_TRUE(sched_->OnJobExited("b-run", /*requeue=*/false).ok());
    EXPECT_TRUE(sched_->Schedule().empty());  // now b uses 0, a 1; n1 has 3 free
    const JobId head = keep ? "a-big" : "b-big";
    EXPECT_EQ(sched_->view().job(head)->reason.code, PendingReason::Code::kHoldsReservation);
    ASSERT_TRUE(sched_->OnJobExited("c-run", /*requeue=*/false).ok());
    d = sched_->Schedule();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].job, head);
  }
}

// A kept head gives way to a job of a higher class, as the order would.
TEST_F(OrderTest, DefaultKeptHeadGivesWayToAHigherClass) {
  SchedulerOptions o = Options(SchedulingPolicy::kDefault);
  o.strict_fair_share = true;
  o.keep_head = true;
  sched_ = std::make_unique<Scheduler>(&clock_, o);
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 4)).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("run", 1, 3, "a")).ok());
  ASSERT_EQ(sched_->Schedule().size(), 1u);
  ASSERT_TRUE(sched_->Submit(MakeJob("low", 1, 4, "a", 0)).ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->view().job("low")->reason.code, PendingReason::Code::kHoldsReservation);
  ASSERT_TRUE(sched_->Submit(MakeJob("high", 1, 2, "b", 1)).ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->view().job("high")->reason.code, PendingReason::Code::kHoldsReservation);
  // Kept, "low" would take all four GPUs once "run" ends.
  ASSERT_TRUE(sched_->OnJobExited("run", /*requeue=*/false).ok());
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "high");
}

// Without strict fair share the head is the oldest job that cannot start,
// and keep_head keeps nothing: a requeued older job goes first.
TEST_F(OrderTest, DefaultKeepsNoHeadWithoutStrictFairShare) {
  SchedulerOptions o = Options(SchedulingPolicy::kDefault);
  o.keep_head = true;
  sched_ = std::make_unique<Scheduler>(&clock_, o);
  ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 4)).ok());
  ASSERT_TRUE(sched_->Submit(MakeJob("old", 1, 4, "a")).ok());
  ASSERT_EQ(sched_->Schedule().size(), 1u);
  ASSERT_TRUE(sched_->Submit(MakeJob("young", 1, 4, "b")).ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->view().last_pass().head, "young");
  ASSERT_TRUE(sched_->OnJobExited("old", /*requeue=*/true).ok());  // failed, restarts left
  auto d = sched_->Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job, "old");
  EXPECT_EQ(sched_->view().last_pass().head, "young");
}

// Under LAS no job of the head's class borrows its reserved GPUs: a borrower
// would be preempted as the head starts, and then wait as a requeued job. A
// lower class still borrows (the head preempts it for priority anyway).
TEST_F(OrderTest, LasLendsTheHeadsReservationOnlyToALowerClass) {
  for (SchedulingPolicy p : {SchedulingPolicy::kDefault, SchedulingPolicy::kLas}) {
    for (int borrower_priority : {0, -1}) {
      SCOPED_TRACE(absl::StrCat(SchedulingPolicyName(p), ", borrower priority ", borrower_priority));
      sched_ = std::make_unique<Scheduler>(&clock_, Options(p));
      ASSERT_TRUE(sched_->AddNode(MakeNode("n1", 2)).ok());
      JobRequest first = MakeJob("first", 1, 1);
      first.time_limit = seconds(100);
      ASSERT_TRUE(sched_->Submit(first).ok());
      ASSERT_EQ(sched_->Schedule().size(), 1u);
      ASSERT_TRUE(sched_->Submit(MakeJob("head", 1, 2)).ok());
      JobRequest borrower = MakeJob("borrower", 1, 1, "t", borrower_priority);
      borrower.preemptible = true;
      borrower.time_limit = seconds(1000);  // ends after the head's reservation
      ASSERT_TRUE(sched_->Submit(borrower).ok());
      auto d = sched_->Schedule();
      if (p == SchedulingPolicy::kLas && borrower_priority == 0) {
        EXPECT_TRUE(d.empty());
        EXPECT_EQ(sched_->view().job("borrower")->reason.code, PendingReason::Code::kBehindReservation);
      } else {
        ASSERT_EQ(d.size(), 1u);
        EXPECT_EQ(d[0].job, "borrower");
      }
    }
  }
}

}  // namespace
}  // namespace athanor::sched
