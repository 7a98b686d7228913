#include "coordinator/core/coordinator_core.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "coordinator/core/core_commands.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {
namespace {

const int kWatchdog = (alarm(60), 0);

absl::StatusOr<HeartbeatResult> Beat(CoordinatorCore* core, const std::string& node,
                                     uint64_t known, std::vector<RankReport> ranks, Duration wait) {
  HeartbeatRequest req;
  req.node = node;
  req.known_generation = known;
  req.ranks = std::move(ranks);
  req.max_wait = wait;
  HeartbeatResult r = HeartbeatAndWait(core, std::move(req));
  if (!r.status.ok()) return r.status;
  return r;
}

absl::StatusOr<std::string> Submit(CoordinatorCore* core, const JobSpec& spec) {
  absl::StatusOr<SubmitResult> r = SubmitAndWait(core, spec);
  if (!r.ok()) return r.status();
  return r->job_id;
}

class CoordinatorCoreTest : public ::testing::Test {
 protected:
  CoordinatorCoreTest() {
    char dir[] = "/tmp/coordinator_core_test.XXXXXX";
    path_ = std::string(mkdtemp(dir)) + "/state.db";
  }
  std::unique_ptr<Store> OpenStore() {
    auto store = SqliteStore::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  std::unique_ptr<CoordinatorCore> Open() {
    auto core = CoordinatorCore::Create(StateOptions(), OpenStore(), &clock_, Seconds(3600));
    EXPECT_TRUE(core.ok()) << core.status();
    return core.ok() ? std::move(*core) : nullptr;
  }
  static NodeRecord Node() {
    NodeRecord n;
    n.name = "n1";
    n.host = "10.1.1.1";
    n.agent_address = "10.1.1.1:9";
    n.inventory.gpus = 2;
    return n;
  }
  static JobSpec Spec() {
    JobSpec s;
    s.nodes = 1;
    s.gpus_per_node = 2;
    s.command = {"train", "--fast"};
    return s;
  }
  FakeClock clock_;
  std::string path_;
};

TEST_F(CoordinatorCoreTest, HeartbeatAnswersEarlyWhenDesiredSetChanges) {
  auto core = Open();
  ASSERT_TRUE(RegisterAndWait(core.get(), Node(), {}).ok());
  auto first = Beat(core.get(), "n1", 0, {}, Seconds(30));
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->reregister);
  EXPECT_TRUE(first->desired.empty());
  absl::StatusOr<HeartbeatResult> polled;
  auto started = std::chrono::steady_clock::now();
  std::thread poller([&] { polled = Beat(core.get(), "n1", first->generation, {}, Seconds(30)); });
  absl::StatusOr<std::string> id = Submit(core.get(), Spec());
  poller.join();
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(polled.ok()) << polled.status();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_GT(polled->generation, first->generation);
  ASSERT_EQ(polled->desired.size(), 2u);
  EXPECT_EQ(polled->desired[1].env.at("RANK"), "1");
  EXPECT_EQ(polled->desired[1].command, (std::vector<std::string>{"train", "--fast"}));
}

TEST_F(CoordinatorCoreTest, ReopenKeepsJobsAndAsksNodesToRegisterAgain) {
  {
    auto core = Open();
    ASSERT_TRUE(RegisterAndWait(core.get(), Node(), {}).ok());
    ASSERT_EQ(*Submit(core.get(), Spec()), "1");
  }
  auto core = Open();
  absl::StatusOr<JobRecord> job = CoreReads(core.get()).GetJob("1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kStarting);
  EXPECT_EQ(job->attempt, 1);
  std::vector<NodeView> nodes = CoreReads(core.get()).ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].record.state, NodeState::kUnknown);
  EXPECT_EQ(nodes[0].gpus_allocated, 2);
  auto hb = Beat(core.get(), "n1", 5, {}, Seconds(30));
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->reregister);
  EXPECT_EQ(*Submit(core.get(), Spec()), "2");  // ids continue after the restart
  EXPECT_EQ(CoreReads(core.get()).GetJob("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorCoreTest, ReopenRebuildsSchedulerWithPreemptingJobQueueOrderAndQuotas) {
  auto running = [](int attempt, RankPhase phase) {
    std::vector<RankReport> out;
    for (int r = 0; r < 2; ++r) {
      RankReport rep;
      rep.job_id = "1";
      rep.attempt = attempt;
      rep.rank = r;
      rep.phase = phase;
      out.push_back(rep);
    }
    return out;
  };
  {
    auto core = Open();
    ASSERT_TRUE(CoreCommands(core.get()).SetQuota("t", 3).ok());
    ASSERT_TRUE(RegisterAndWait(core.get(), Node(), {}).ok());
    JobSpec a = Spec();
    a.tenant = "t";
    a.preemptible = true;
    a.grace_period_s = 50;
    ASSERT_EQ(*Submit(core.get(), a), "1");
    ASSERT_EQ(*Submit(core.get(), Spec()), "2");
    JobSpec c = Spec();
    c.gpus_per_node = 1;
    ASSERT_EQ(*Submit(core.get(), c), "3");
    ASSERT_TRUE(Beat(core.get(), "n1", 0, running(1, RankPhase::kRunning), Duration::zero()).ok());
    ASSERT_EQ(CoreReads(core.get()).GetJob("1")->state, JobState::kRunning);
    ASSERT_TRUE(CoreCommands(core.get()).PreemptJob("1", Duration::zero()).ok());  // the job's own 50 s
  }
  clock_.Advance(Seconds(5));
  auto core = Open();
  JobRecord a = *CoreReads(core.get()).GetJob("1");
  EXPECT_EQ(a.state, JobState::kPreempting);
  EXPECT_DOUBLE_EQ(a.preempt_deadline_unix, clock_.UnixSeconds() - 5 + 50);
  std::vector<QuotaRow> quotas = CoreReads(core.get()).Quotas();
  ASSERT_EQ(quotas.size(), 1u);
  EXPECT_EQ(quotas[0].gpus, 3);
  EXPECT_EQ(quotas[0].gpus_in_use, 2);  // held by the PREEMPTING attempt
  ASSERT_TRUE(RegisterAndWait(core.get(), Node(), running(1, RankPhase::kRunning)).ok());
  auto hb = Beat(core.get(), "n1", 0, running(1, RankPhase::kExited), Duration::zero());
  ASSERT_TRUE(hb.ok());
  a = *CoreReads(core.get()).GetJob("1");
  // Requeued without a restart, and first again in submission order.
  EXPECT_EQ(a.restarts, 0);
  EXPECT_EQ(a.state, JobState::kStarting);
  EXPECT_EQ(a.attempt, 2);
  EXPECT_EQ(CoreReads(core.get()).GetJob("2")->state, JobState::kPending);
  absl::StatusOr<WhyResult> why = CoreReads(core.get()).Why("3");
  ASSERT_TRUE(why.ok());
  EXPECT_EQ(why->reasons.back(), "position 2 of 2 in the queue");
}

TEST_F(CoordinatorCoreTest, DeferredSchedulingDeliversPlacementThroughTheLongPoll) {
  StateOptions options;
  options.schedule_inline = false;  // as athanor-coordinator runs
  auto core = CoordinatorCore::Create(options, OpenStore(), &clock_, Seconds(3600));
  ASSERT_TRUE(core.ok()) << core.status();
  ASSERT_TRUE(RegisterAndWait(core->get(), Node()).ok());
  auto first = Beat(core->get(), "n1", 0, {}, Duration::zero());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->desired.empty());
  absl::StatusOr<SubmitResult> id = SubmitAndWait(core->get(), Spec(), "retry-me");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->job_id, "1");
  // The pass runs on the core's loop; the parked poll is answered once the
  // placement is durable.
  auto polled = Beat(core->get(), "n1", first->generation, {}, Seconds(30));
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->desired.size(), 2u);
  EXPECT_EQ(polled->desired[0].job_id, "1");
  EXPECT_GT(polled->generation, first->generation);
  absl::StatusOr<SubmitResult> again = SubmitAndWait(core->get(), Spec(), "retry-me");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->job_id, "1");
  EXPECT_TRUE(again->duplicate);
  core->reset();
  // The key is durable with the job.
  auto reopened = Open();
  absl::StatusOr<SubmitResult> after = SubmitAndWait(reopened.get(), Spec(), "retry-me");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->job_id, "1");
  EXPECT_TRUE(after->duplicate);
  EXPECT_EQ(CoreReads(reopened.get()).ListJobs(true, "").size(), 1u);
}

TEST_F(CoordinatorCoreTest, CancelledPollIsAnsweredCancelled) {
  auto core = Open();
  ASSERT_TRUE(RegisterAndWait(core.get(), Node()).ok());
  auto first = Beat(core.get(), "n1", 0, {}, Duration::zero());
  ASSERT_TRUE(first.ok());
  absl::Notification answered;
  HeartbeatResult result;
  const LongPolls::Id id = core->NewPollId();
  HeartbeatRequest req;
  req.node = "n1";
  req.known_generation = first->generation;
  req.max_wait = Seconds(3600);
  core->Heartbeat(id, req, [&](HeartbeatResult r) {
    result = std::move(r);
    answered.Notify();
  });
  EXPECT_FALSE(answered.HasBeenNotified());  // parked: nothing changed
  core->CancelHeartbeat(id);
  answered.WaitForNotification();
  EXPECT_EQ(result.status.code(), absl::StatusCode::kCancelled);
  core->CancelHeartbeat(id);  // a second cancel finds nothing to answer
}

TEST_F(CoordinatorCoreTest, ShutdownAnswersParkedPolls) {
  auto core = Open();
  ASSERT_TRUE(RegisterAndWait(core.get(), Node()).ok());
  auto first = Beat(core.get(), "n1", 0, {}, Duration::zero());
  ASSERT_TRUE(first.ok());
  absl::StatusOr<HeartbeatResult> parked;
  std::thread poller([&] { parked = Beat(core.get(), "n1", first->generation, {}, Seconds(3600)); });
  // Shutdown must answer a poll that is parked (one arriving after it is
  // refused at once, also Unavailable): wait for the park, an event.
  ASSERT_TRUE(core->polls().AwaitParked(1, absl::Seconds(30)));
  EXPECT_EQ(core->polls().size(), 1u);
  core->Shutdown();
  poller.join();
  EXPECT_EQ(parked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(core->polls().size(), 0u);
}

}  // namespace
}  // namespace athanor::coord
