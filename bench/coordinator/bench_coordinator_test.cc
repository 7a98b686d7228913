// Unit tests of the bench's helpers: percentiles, the timer queue's order,
// /proc sampling, and the simulated fleet's own deadlines.
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "testing/coordinator/latency.h"
#include "bench/coordinator/proc_sampler.h"
#include "testing/coordinator/sim_fleet.h"
#include "testing/coordinator/timer_queue.h"

namespace athanor::bench {
namespace {

TEST(PercentileTest, NearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(Percentile(v, 50), 3);
  EXPECT_EQ(Percentile(v, 99), 5);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, 100), 5);
  std::vector<double> empty;
  EXPECT_EQ(Percentile(empty, 50), 0);
}

TEST(TimerQueueTest, RunsByDeadlineThenByScheduleOrder) {
  TimerQueue timers;
  absl::Notification started, release;
  absl::Mutex mu;
  std::vector<char> ran;
  auto record = [&](char c) {
    absl::MutexLock lock(&mu);
    ran.push_back(c);
  };
  auto t0 = TimerQueue::Clock::now();
  // The first entry holds the queue's thread until the others are queued, so
  // their order comes from their deadlines alone.
  timers.Schedule(t0, [&] {
    started.Notify();
    release.WaitForNotification();
    record('0');
  });
  started.WaitForNotification();
  timers.Schedule(t0 - std::chrono::milliseconds(1), [&] { record('c'); });
  timers.Schedule(t0 - std::chrono::milliseconds(3), [&] { record('a'); });
  timers.Schedule(t0 - std::chrono::milliseconds(3), [&] { record('b'); });
  release.Notify();
  absl::MutexLock lock(&mu);
  auto four = [&ran]() { return ran.size() == 4; };
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&four), absl::Seconds(20)));
  EXPECT_EQ(std::string(ran.begin(), ran.end()), "0abc");
}

TEST(TimerQueueTest, StopDropsWhatHasNotRun) {
  TimerQueue timers;
  bool ran = false;
  timers.Schedule(TimerQueue::Clock::now() + std::chrono::hours(1), [&] { ran = true; });
  timers.Stop();
  timers.Schedule(TimerQueue::Clock::now(), [&] { ran = true; });
  EXPECT_FALSE(ran);
}

TEST(ProcSampleTest, CountsThreadsOfALiveProcess) {
  std::optional<ProcSample> before = ReadProcSample(getpid());
  ASSERT_TRUE(before.has_value());
  absl::Notification done;
  std::thread extra([&] { done.WaitForNotification(); });
  std::optional<ProcSample> during = ReadProcSample(getpid());
  done.Notify();
  extra.join();
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(during->threads, before->threads + 1);
  EXPECT_GT(during->rss_kb, 0);
  EXPECT_GE(during->hwm_kb, during->rss_kb);
  EXPECT_GE(during->cpu_s, before->cpu_s);
}

TEST(ProcSampleTest, MissingProcessIsNullopt) {
  EXPECT_FALSE(ReadProcSample(-1).has_value());
}

// A coordinator stand-in: registers every agent with a 100 ms interval, never
// answers the first heartbeat (it ends only when the caller cancels it), and
// answers every later one at once.
class SilentFirstHeartbeat final : public rpc::NodeAgent::CallbackService {
 public:
  grpc::ServerUnaryReactor* RegisterNode(grpc::CallbackServerContext* ctx,
                                         const rpc::RegisterNodeRequest*,
                                         rpc::RegisterNodeResponse* resp) override {
    resp->set_heartbeat_interval_ms(100);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const rpc::HeartbeatRequest*,
                                      rpc::HeartbeatResponse*) override {
    int n;
    {
      absl::MutexLock lock(&mu_);
      n = ++heartbeats_;
    }
    if (n > 1) {
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }
    return new Held();
  }
  // Waits until `n` heartbeats have arrived; false after `timeout`.
  bool AwaitHeartbeats(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return heartbeats_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  struct Held final : grpc::ServerUnaryReactor {
    void OnCancel() override { Finish(grpc::Status::CANCELLED); }
    void OnDone() override { delete this; }
  };
  absl::Mutex mu_;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(SimFleetTest, AHeartbeatNobodyAnswersFailsAtItsDeadline) {
  SilentFirstHeartbeat service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // As the coordinator: no server-side deadlines, so only the fleet's own
  // timer can end the first heartbeat.
  builder.AddChannelArgument(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);

  SimFleetOptions options;
  options.address = "127.0.0.1:" + std::to_string(port);
  options.agents = 1;
  options.heartbeat_slack = std::chrono::milliseconds(200);
  SimFleet fleet(options);
  fleet.Start();
  ASSERT_TRUE(fleet.WaitRegistered(std::chrono::seconds(20)));
  // The first heartbeat's deadline (100 + 200 ms) cancels it; the retry
  // after the back-off is the second, answered at once, and the third
  // follows its answer.
  ASSERT_TRUE(service.AwaitHeartbeats(3, absl::Seconds(20)));
  fleet.Stop();
  FleetCounters c = fleet.Take();
  EXPECT_EQ(c.registered, 1);
  EXPECT_EQ(c.heartbeat_errors, 1);
  EXPECT_EQ(c.first_error, "Heartbeat: code 4: Deadline Exceeded");
  EXPECT_GE(c.heartbeats, 1);
  server->Shutdown();
}

}  // namespace
}  // namespace athanor::bench
