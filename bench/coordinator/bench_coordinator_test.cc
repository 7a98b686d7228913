// Unit tests of the bench's helpers: percentiles, the timer queue's order and
// /proc sampling.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/coordinator/latency.h"
#include "bench/coordinator/proc_sampler.h"
#include "bench/coordinator/timer_queue.h"

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

}  // namespace
}  // namespace athanor::bench
