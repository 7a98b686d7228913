// LeaderElection against a real one-member etcd (testing/etcd), with a 2 s
// lease: who leads, how fast a clean exit hands over, what a leader whose
// lease is gone sees, and that its fence then fails.
#include "coordinator/store/etcd/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "coordinator/store/etcd/etcd_client.h"
#include "testing/coordinator/watchdog.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor::coord::etcd {
namespace {

using ::athanor::testing_etcd::EtcdCluster;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kTtl{2};
const char kPrefix[] = "/athanor-le";

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bench::ArmWatchdog(120, "leader_election_test: hung (etcd cluster or a campaign)\n");
    absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(1);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
  }
  void TearDown() override { bench::DisarmWatchdog(); }

  // A client of its own per candidate, as each coordinator has; calls fail
  // within a second so that a stopped member does not stall the test.
  std::unique_ptr<EtcdClient> NewClient() {
    absl::StatusOr<EtcdUri> uri = ParseEtcdUri(cluster_->uri("athanor-le"));
    EXPECT_TRUE(uri.ok()) << uri.status();
    absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(*uri, {}, std::chrono::seconds(1));
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  static LeaderElection::Options Options(std::string address, std::function<void()> on_lost) {
    LeaderElection::Options o;
    o.prefix = kPrefix;
    o.address = std::move(address);
    o.ttl = kTtl;
    o.retry = std::chrono::milliseconds(50);
    o.on_lost = std::move(on_lost);
    return o;
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(LeaderElectionTest, OneLeadsTheOtherWaitsAndTakesOverAtOnceOnACleanExit) {
  std::unique_ptr<EtcdClient> ca = NewClient(), cb = NewClient();
  std::atomic<int> a_lost{0}, b_lost{0};
  absl::StatusOr<std::unique_ptr<LeaderElection>> a =
      LeaderElection::Campaign(ca.get(), Options("10.0.0.1:7700", [&] { ++a_lost; }), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  const int64_t term_a = (*a)->term();
  EXPECT_GT(term_a, 0);
  EXPECT_EQ((*a)->key(), "/athanor-le/leader");

  absl::StatusOr<std::pair<std::string, int64_t>> leader = LeaderElection::Leader(cb.get(), kPrefix);
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(*leader, std::make_pair(std::string("10.0.0.1:7700"), term_a));

  // B waits: it reports A as the leader, once.
  absl::Notification b_saw_a;
  std::atomic<int> b_waits{0};
  std::pair<std::string, int64_t> b_saw;
  LeaderElection::Options ob = Options("10.0.0.2:7700", [&] { ++b_lost; });
  ob.on_waiting = [&](const std::string& addr, int64_t term) {
    if (b_waits++ == 0) {
      b_saw = {addr, term};
      b_saw_a.Notify();
    }
  };
  absl::StatusOr<std::unique_ptr<LeaderElection>> b = absl::UnknownError("not yet");
  absl::Notification b_leads;
  std::thread candidate([&] {
    b = LeaderElection::Campaign(cb.get(), std::move(ob), nullptr);
    b_leads.Notify();
  });
  b_saw_a.WaitForNotification();
  EXPECT_EQ(b_saw, std::make_pair(std::string("10.0.0.1:7700"), term_a));
  EXPECT_FALSE(b_leads.HasBeenNotified());

  // A leaves cleanly: its lease is revoked, and B leads well before the ttl.
  const Clock::time_point left = Clock::now();
  a->reset();
  ASSERT_TRUE(b_leads.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const auto took = Clock::now() - left;
  candidate.join();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_LT(took, std::chrono::milliseconds(1000));
  EXPECT_GT((*b)->term(), term_a);
  EXPECT_EQ(b_waits.load(), 1);
  leader = LeaderElection::Leader(ca.get(), kPrefix);
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(*leader, std::make_pair(std::string("10.0.0.2:7700"), (*b)->term()));
  EXPECT_EQ(a_lost.load(), 0);  // a clean exit is no loss
  b->reset();
  EXPECT_EQ(b_lost.load(), 0);
  EXPECT_EQ(LeaderElection::Leader(ca.get(), kPrefix).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LeaderElectionTest, ALeaderWhoseLeaseIsRevokedLosesAndItsFenceFails) {
  std::unique_ptr<EtcdClient> ca = NewClient(), cb = NewClient(), third = NewClient();
  absl::Notification a_lost;
  std::atomic<int> a_lost_calls{0};
  absl::StatusOr<std::unique_ptr<LeaderElection>> a = LeaderElection::Campaign(
      ca.get(), Options("10.0.0.1:7700", [&] {
        if (a_lost_calls++ == 0) a_lost.Notify();
      }),
      nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  const Compare old_fence = (*a)->Fence();
  EXPECT_EQ(old_fence.key, "/athanor-le/leader");
  EXPECT_EQ(old_fence.target, Compare::Target::kCreateRevision);
  EXPECT_EQ(old_fence.result, Compare::Result::kEqual);
  EXPECT_EQ(old_fence.number, (*a)->term());
  // The first term on the prefix.
  absl::StatusOr<int64_t> terms = (*a)->CountTerm();
  ASSERT_TRUE(terms.ok()) << terms.status();
  EXPECT_EQ(*terms, 1);

  // While A leads, a write under its fence goes through.
  absl::StatusOr<TxnResult> txn = third->Txn({old_fence}, {Op::Put("/athanor-le/x", "a")});
  ASSERT_TRUE(txn.ok()) << txn.status();
  EXPECT_TRUE(txn->succeeded);

  // Revoke A's lease behind its back: the leader key goes with it.
  absl::StatusOr<RangeResult> key = third->Range("/athanor-le/leader");
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_EQ(key->kvs.size(), 1u);
  ASSERT_NE(key->kvs[0].lease, 0);
  const Clock::time_point revoked = Clock::now();
  ASSERT_TRUE(third->RevokeLease(key->kvs[0].lease).ok());
  ASSERT_TRUE(a_lost.WaitForNotificationWithTimeout(absl::FromChrono(kTtl)));
  EXPECT_LE(Clock::now() - revoked, kTtl);

  absl::StatusOr<std::unique_ptr<LeaderElection>> b =
      LeaderElection::Campaign(cb.get(), Options("10.0.0.2:7700", [] {}), nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT((*b)->term(), (*a)->term());
  // The deposed leader cannot count; the new one counts the change.
  terms = (*a)->CountTerm();
  EXPECT_EQ(terms.status().code(), absl::StatusCode::kFailedPrecondition) << terms.status();
  terms = (*b)->CountTerm();
  ASSERT_TRUE(terms.ok()) << terms.status();
  EXPECT_EQ(*terms, 2);
  absl::StatusOr<RangeResult> count = third->Range("/athanor-le/terms");
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_EQ(count->kvs.size(), 1u);
  EXPECT_EQ(count->kvs[0].value, "2");

  // A's writes are refused by etcd now; B's go through.
  txn = third->Txn({old_fence}, {Op::Put("/athanor-le/x", "a-late")});
  ASSERT_TRUE(txn.ok()) << txn.status();
  EXPECT_FALSE(txn->succeeded);
  txn = third->Txn({(*b)->Fence()}, {Op::Put("/athanor-le/x", "b")});
  ASSERT_TRUE(txn.ok()) << txn.status();
  EXPECT_TRUE(txn->succeeded);
  absl::StatusOr<RangeResult> x = third->Range("/athanor-le/x");
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_EQ(x->kvs.size(), 1u);
  EXPECT_EQ(x->kvs[0].value, "b");

  a->reset();  // revoking a lease already gone changes nothing
  EXPECT_EQ(a_lost_calls.load(), 1);
  absl::StatusOr<std::pair<std::string, int64_t>> leader = LeaderElection::Leader(third.get(), kPrefix);
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(*leader, std::make_pair(std::string("10.0.0.2:7700"), (*b)->term()));
}

TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdLosesWithinTheTtl) {
  std::unique_ptr<EtcdClient> ca = NewClient();
  absl::Notification lost;
  absl::StatusOr<std::unique_ptr<LeaderElection>> a =
      LeaderElection::Campaign(ca.get(), Options("10.0.0.1:7700", [&] { lost.Notify(); }), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  const Clock::time_point cut = Clock::now();
  ASSERT_TRUE(cluster_->Kill(0).ok());
  // The guard gives up at the lease's deadline less a sixth of the ttl,
  // whatever the renewal call in flight is doing.
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(absl::FromChrono(kTtl)));
  EXPECT_LE(Clock::now() - cut, kTtl);
}

TEST_F(LeaderElectionTest, AWaitingCandidateStopsWhenTold) {
  std::unique_ptr<EtcdClient> ca = NewClient(), cb = NewClient();
  absl::StatusOr<std::unique_ptr<LeaderElection>> a =
      LeaderElection::Campaign(ca.get(), Options("10.0.0.1:7700", [] {}), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::Notification waiting, stop;
  LeaderElection::Options ob = Options("10.0.0.2:7700", [] {});
  ob.on_waiting = [&](const std::string&, int64_t) {
    if (!waiting.HasBeenNotified()) waiting.Notify();
  };
  absl::StatusOr<std::unique_ptr<LeaderElection>> b = absl::UnknownError("not yet");
  std::thread candidate([&] { b = LeaderElection::Campaign(cb.get(), std::move(ob), &stop); });
  waiting.WaitForNotification();
  stop.Notify();
  candidate.join();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(b.status().message(), "leader election: stopped");
}

TEST(LeaderElectionOptionsTest, RefusesWithoutOnLostOrWithATtlUnderASecond) {
  absl::StatusOr<std::unique_ptr<LeaderElection>> e = LeaderElection::Campaign(nullptr, {}, nullptr);
  EXPECT_EQ(e.status().message(), "leader election: on_lost is required");
  LeaderElection::Options o;
  o.on_lost = [] {};
  o.ttl = std::chrono::seconds(0);
  e = LeaderElection::Campaign(nullptr, o, nullptr);
  EXPECT_EQ(e.status().message(), "leader election: the lease's ttl must be at least 1 s");
}

}  // namespace
}  // namespace athanor::coord::etcd
