#include "coordinator/long_polls.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "coordinator/coordinator_core.h"

namespace athanor::coord {
namespace {

const int kWatchdog = (alarm(60), 0);

// What one of the two callbacks was handed, and on which thread.
struct Handed {
  absl::Mutex mu;
  std::vector<LongPolls::Id> ids ABSL_GUARDED_BY(mu);
  std::thread::id thread ABSL_GUARDED_BY(mu);
  absl::Notification called;

  LongPolls::Answer Callback() {
    return [this](std::vector<LongPolls::Poll> polls) {
      {
        absl::MutexLock lock(&mu);
        for (LongPolls::Poll& p : polls) {
          ids.push_back(p.id);
          p.reply(HeartbeatResult{});
        }
        std::sort(ids.begin(), ids.end());
        thread = std::this_thread::get_id();
      }
      if (!called.HasBeenNotified()) called.Notify();
    };
  }
};

LongPolls::Poll MakePoll(LongPolls* polls, const std::string& node, absl::Time deadline) {
  LongPolls::Poll p;
  p.id = polls->NextId();
  p.node = node;
  p.received = absl::Now();
  p.deadline = deadline;
  p.reply = [](HeartbeatResult) {};
  return p;
}

TEST(LongPollsTest, WakeHandsTheNamedNodesPollsToTheTimerThreadAndLeavesTheRest) {
  Handed expired, woken;
  LongPolls polls(expired.Callback(), woken.Callback());
  const absl::Time later = absl::Now() + absl::Hours(1);
  polls.Park(MakePoll(&polls, "a", later));  // id 1
  polls.Park(MakePoll(&polls, "b", later));  // id 2
  polls.Park(MakePoll(&polls, "a", later));  // id 3
  polls.Park(MakePoll(&polls, "c", later));  // id 4

  polls.Wake({"a", "c", "absent"});
  woken.called.WaitForNotification();

  absl::MutexLock lock(&woken.mu);
  EXPECT_EQ(woken.ids, (std::vector<LongPolls::Id>{1, 3, 4}));
  EXPECT_NE(woken.thread, std::this_thread::get_id());
  EXPECT_EQ(polls.size(), 1u);
  std::vector<LongPolls::Poll> rest = polls.TakeAll();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].id, 2u);
  EXPECT_EQ(rest[0].node, "b");
  EXPECT_FALSE(expired.called.HasBeenNotified());
}

TEST(LongPollsTest, AnExpiredPollGoesToExpireNotWake) {
  Handed expired, woken;
  LongPolls polls(expired.Callback(), woken.Callback());
  polls.Park(MakePoll(&polls, "a", absl::Now() + absl::Hours(1)));  // id 1
  polls.Park(MakePoll(&polls, "b", absl::Now()));                   // id 2: due now

  expired.called.WaitForNotification();

  absl::MutexLock lock(&expired.mu);
  EXPECT_EQ(expired.ids, (std::vector<LongPolls::Id>{2}));
  EXPECT_FALSE(woken.called.HasBeenNotified());
  EXPECT_EQ(polls.size(), 1u);
}

}  // namespace
}  // namespace athanor::coord
