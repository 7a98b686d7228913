// TenantAccounts::TrackUse through ClusterState, driven by a FakeClock: each
// signal that keeps an interactive instance (network, disk, notebook kernel,
// CPU) with its threshold, which one is recorded, and when the warning and
// the reclaim come for one that shows none.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"

namespace athanor::coord {
namespace {

constexpr double kT0 = 1700000000;  // FakeClock's start: 2023-11-14T22:13:20Z

class IdleSignalsTest : public ::testing::Test {
 protected:
  // A report's figures for its job, `t` seconds after kT0.
  using Fill = std::function<void(double t, RankReport*)>;

  void SetUp() override {
    StateOptions o;
    o.min_run_time = Duration::zero();
    o.idle_reclaim_grace = Seconds(5);
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 2;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
  }
  std::string Submit(Fill fill) {
    JobSpec s;
    s.tenant = "t";
    s.command = {"sleep", "infinity"};
    s.interactive = true;
    s.idle_timeout_s = 10;
    std::string id = state_->SubmitJob(s)->job_id;
    fills_[id] = std::move(fill);
    return id;
  }
  // Advances the clock, reports every running rank with its job's figures, ticks.
  void Step(double seconds) {
    clock_.Advance(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds)));
    t_ += seconds;
    const double t = t_;
    for (const char* node : {"n1", "n2"}) {
      std::vector<RankReport> reports;
      for (const DesiredRank& d : ClusterAgents::DesiredFor(*state_, node)) {
        reports.push_back(ReportOf(d));
        auto it = fills_.find(d.job_id);
        if (it != fills_.end()) it->second(t, &reports.back());
      }
      ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), reports));
    }
    state_->Tick();
  }
  const JobRecord& Job(const std::string& id) { return *state_->jobs().Find(id); }
  static Fill Counters(double net_per_s, double disk_per_s) {
    return [=](double t, RankReport* r) {
      r->activity_measured = true;
      r->net_bytes = net_per_s * t;
      r->disk_write_bytes = disk_per_s * t;
    };
  }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
  std::map<std::string, Fill> fills_;
  double t_ = 0;  // seconds since kT0
};

TEST_F(IdleSignalsTest, NetworkDiskAndKernelKeepAnInstanceAnIdleOneIsReclaimed) {
  std::string net = Submit(Counters(100000, 0));   // over 64 KiB/s
  std::string disk = Submit(Counters(0, 70000));   // over 64 KiB/s
  std::string kernel = Submit([](double, RankReport* r) { r->kernels_busy = 1; });
  std::string idle = Submit(Counters(60000, 60000));  // both under
  Step(0);
  ASSERT_EQ(Job(idle).state, JobState::kRunning);
  for (int s = 0; s < 9; ++s) Step(1);
  EXPECT_FALSE(Job(idle).idle_warned);  // 9 s
  EXPECT_EQ(Job(idle).reclaim_at_unix, kT0 + 15);
  Step(1);
  EXPECT_TRUE(Job(idle).idle_warned);
  EXPECT_EQ(Job(idle).reason,
            "idle since 2023-11-14T22:13:20Z; reclaim in 5 s, at 2023-11-14T22:13:35Z, unless used "
            "(athanor alloc --keep " + idle + ")");
  for (int s = 0; s < 4; ++s) Step(1);
  EXPECT_FALSE(Job(idle).stopping);  // 14 s: inside the grace
  Step(1);
  EXPECT_TRUE(Job(idle).stopping);
  EXPECT_EQ(Job(idle).stop_reason, "reclaimed: idle for 15 s");
  for (int s = 0; s < 15; ++s) Step(1);  // 30 s
  for (const std::string& id : {net, disk, kernel}) {
    EXPECT_EQ(Job(id).state, JobState::kRunning) << id;
    EXPECT_FALSE(Job(id).idle_warned) << id;
    EXPECT_EQ(Job(id).last_activity.at_unix, kT0 + 30) << id;
    EXPECT_EQ(Job(id).reclaim_at_unix, kT0 + 45) << id;
  }
  EXPECT_EQ(Job(net).last_activity.signal, "network");
  EXPECT_EQ(Job(net).last_activity.detail, "100.0 kB/s");
  EXPECT_EQ(Job(disk).last_activity.signal, "disk");
  EXPECT_EQ(Job(disk).last_activity.detail, "70.0 kB/s written");
  EXPECT_EQ(Job(kernel).last_activity.signal, "kernel");
  EXPECT_EQ(Job(kernel).last_activity.detail, "1 kernel busy");
  EXPECT_EQ(Job(idle).last_activity.signal, "");  // nothing ever counted
}

TEST_F(IdleSignalsTest, KernelActivityPrecedenceAndCountersThatFell) {
  // The kernel was last active every 4 s; nothing else.
  std::string kernel = Submit([](double t, RankReport* r) {
    r->kernels_busy = 0;
    r->kernel_last_activity_unix = static_cast<int64_t>(kT0 + 4 * static_cast<int>(t / 4));
  });
  // Network and one core at once: the network is recorded.
  std::string both = Submit([](double t, RankReport* r) {
    Counters(200000, 0)(t, r);
    r->cpu_seconds = t;
  });
  // A process that moved much and ended: its group's counters fell to 0.
  std::string fell = Submit([](double t, RankReport* r) { Counters(t < 3 ? 1e9 : 0, 0)(t, r); });
  Step(0);
  for (int s = 0; s < 2; ++s) Step(1);
  EXPECT_EQ(Job(fell).last_activity.signal, "network");
  EXPECT_EQ(Job(fell).last_activity.detail, "1.0 GB/s");
  for (int s = 0; s < 13; ++s) Step(1);  // 15 s
  EXPECT_TRUE(Job(fell).idle_warned);
  EXPECT_EQ(Job(fell).last_activity.at_unix, kT0 + 2);
  Step(1);
  EXPECT_FALSE(Job(kernel).idle_warned);
  EXPECT_EQ(Job(kernel).last_activity.signal, "kernel");
  EXPECT_EQ(Job(kernel).last_activity.detail, "kernel active at 2023-11-14T22:13:36Z");
  EXPECT_EQ(Job(kernel).last_activity.at_unix, kT0 + 16);
  EXPECT_EQ(Job(both).last_activity.signal, "network");
  EXPECT_EQ(Job(both).last_activity.detail, "200.0 kB/s");
  // A report within half a second of the last sample gives no rate.
  Step(0.25);
  EXPECT_EQ(Job(both).last_activity.at_unix, kT0 + 16);
  Step(0.25);
  EXPECT_EQ(Job(both).last_activity.at_unix, kT0 + 16.5);
}

TEST_F(IdleSignalsTest, KeepClearsTheWarningAndGivesOneMoreIdlePeriod) {
  std::string id = Submit(Counters(0, 0));
  Step(0);
  for (int s = 0; s < 10; ++s) Step(1);
  ASSERT_TRUE(Job(id).idle_warned);
  Step(1);
  absl::StatusOr<JobRecord> kept = state_->jobs().NoteActivity(id, "keep", "athanor alloc --keep");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->idle_warned);
  EXPECT_EQ(kept->reason, "");
  EXPECT_EQ(kept->reclaim_at_unix, kT0 + 11 + 15);
  EXPECT_EQ(kept->last_activity.signal, "keep");
  for (int s = 0; s < 14; ++s) Step(1);  // 25 s
  EXPECT_TRUE(Job(id).idle_warned);
  EXPECT_FALSE(Job(id).stopping);
  Step(1);
  EXPECT_TRUE(Job(id).stopping);
  EXPECT_EQ(Job(id).stop_reason, "reclaimed: idle for 15 s");
}

}  // namespace
}  // namespace athanor::coord
