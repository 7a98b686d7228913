#include "coordinator/store/group_commit.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/store/fake_store.h"

namespace athanor::coord {
namespace {

const int kWatchdog = (alarm(60), 0);


Changes OneJob(int64_t seq, const std::string& name) {
  Changes c;
  JobRecord j;
  j.seq = seq;
  j.id = std::to_string(seq);
  j.spec.name = name;
  j.spec.command = {"true"};
  c.jobs.push_back(j);
  return c;
}

TEST(GroupCommitTest, EveryBatchIsDurableInOrderAndLaterSnapshotsWin) {
  auto data = std::make_shared<FakeStore::Data>();
  std::vector<std::pair<std::set<std::string>, uint64_t>> durable;
  std::vector<int> done_order;
  absl::Notification last;
  constexpr int kBatches = 200;
  GroupCommitter::Stats stats;
  {
    GroupCommitter committer(std::make_unique<FakeStore>(data),
                             [&](const std::set<std::string>& nodes, uint64_t gen) {
                               durable.emplace_back(nodes, gen);
                             });
    for (int i = 0; i < kBatches; ++i) {
      // Jobs 1..10, each rewritten 20 times: the last name must win.
      committer.Commit(OneJob(i % 10 + 1, absl::StrCat("v", i)), {absl::StrCat("n", i % 3)},
                       static_cast<uint64_t>(i + 1), [&, i](absl::Status s) {
                         EXPECT_TRUE(s.ok()) << s;
                         done_order.push_back(i);
                         if (i == kBatches - 1) last.Notify();
                       });
    }
    last.WaitForNotification();
    stats = committer.stats();
  }
  // A round answers its batches before it reports the nodes durable, so
  // `durable` is read only once the committer's thread has ended.
  EXPECT_EQ(stats.batches, static_cast<uint64_t>(kBatches));
  EXPECT_LE(stats.rounds, stats.batches);
  EXPECT_EQ(stats.rounds, durable.size());
  std::vector<int> expected(kBatches);
  for (int i = 0; i < kBatches; ++i) expected[i] = i;
  EXPECT_EQ(done_order, expected);
  ASSERT_FALSE(durable.empty());
  EXPECT_EQ(durable.back().second, static_cast<uint64_t>(kBatches));
  std::set<std::string> all_nodes;
  for (const auto& [nodes, gen] : durable) all_nodes.insert(nodes.begin(), nodes.end());
  EXPECT_EQ(all_nodes, (std::set<std::string>{"n0", "n1", "n2"}));
  FakeStore reopened(data);
  absl::StatusOr<Store::Contents> contents = reopened.LoadAll();
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->jobs.size(), 10u);
  for (const JobRecord& j : contents->jobs) {
    EXPECT_EQ(j.spec.name, absl::StrCat("v", 190 + j.seq - 1)) << "job " << j.seq;
  }
}

TEST(GroupCommitTest, BatchesQueuedDuringAWriteShareTheNextRound) {
  absl::Notification first_written, queued;
  int rounds_seen = 0;
  GroupCommitter committer(std::make_unique<FakeStore>(), [&](const std::set<std::string>&, uint64_t) {
    if (++rounds_seen == 1) {
      first_written.Notify();
      queued.WaitForNotification();  // hold the committer while 7 more arrive
    }
  });
  std::vector<absl::Status> results(8, absl::UnknownError("not answered"));
  absl::Notification all_done;
  int answered = 0;
  auto done = [&](int i) {
    return [&, i](absl::Status s) {
      results[i] = s;
      if (++answered == 8) all_done.Notify();
    };
  };
  committer.Commit(OneJob(1, "a"), {}, 1, done(0));
  first_written.WaitForNotification();
  for (int i = 1; i < 8; ++i) committer.Commit(OneJob(i + 1, "b"), {}, 1, done(i));
  queued.Notify();
  all_done.WaitForNotification();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  GroupCommitter::Stats stats = committer.stats();
  EXPECT_EQ(stats.batches, 8u);
  EXPECT_EQ(stats.rounds, 2u);  // one fsync for the seven that queued meanwhile
}

// Jobs seq first..first+n-1, one batch.
Changes Jobs(int64_t first, int n) {
  Changes c;
  for (int i = 0; i < n; ++i) c.jobs.push_back(OneJob(first + i, "j").jobs[0]);
  return c;
}

// Forwards to a FakeStore and notes how many records each Commit held.
class CountingStore final : public Store {
 public:
  explicit CountingStore(std::vector<size_t>* sizes) : sizes_(sizes) {}
  absl::Status Commit(const Changes& changes) override {
    sizes_->push_back(RecordCount(changes));
    return inner_.Commit(changes);
  }
  absl::StatusOr<Contents> LoadAll() override { return inner_.LoadAll(); }
  StoreLog log() const override { return {}; }

 private:
  std::vector<size_t>* const sizes_;  // written on the committer thread only
  FakeStore inner_;
};

TEST(GroupCommitTest, ARoundHoldsAtMostTheCapAndABiggerBatchGoesAlone) {
  std::vector<size_t> sizes;
  absl::Notification first_written, queued, all_done;
  int rounds_seen = 0;
  constexpr size_t kCap = 5;
  GroupCommitter committer(
      std::make_unique<CountingStore>(&sizes),
      [&](const std::set<std::string>&, uint64_t) {
        if (++rounds_seen == 1) {
          first_written.Notify();
          queued.WaitForNotification();  // hold the committer while the rest queue
        }
      },
      nullptr, kCap);
  // Batches of 1, then 2, 2, 2, 7, 1, 3 records queued behind it.
  const std::vector<int> batch_sizes = {1, 2, 2, 2, 7, 1, 3};
  int answered = 0;
  int64_t seq = 1;
  for (size_t i = 0; i < batch_sizes.size(); ++i) {
    committer.Commit(Jobs(seq, batch_sizes[i]), {}, 1, [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      if (++answered == static_cast<int>(batch_sizes.size())) all_done.Notify();
    });
    seq += batch_sizes[i];
    if (i == 0) first_written.WaitForNotification();
  }
  queued.Notify();
  all_done.WaitForNotification();
  // 2+2 (a third 2 would make 6), 2 (7 would make 9), 7 alone, 1+3.
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 4, 2, 7, 4}));
  GroupCommitter::Stats stats = committer.stats();
  EXPECT_EQ(stats.batches, 7u);
  EXPECT_EQ(stats.rounds, 5u);
}

TEST(GroupCommitTest, BillingRecordsAreDurable) {
  auto data = std::make_shared<FakeStore::Data>();
  {
    GroupCommitter committer(std::make_unique<FakeStore>(data),
                             [](const std::set<std::string>&, uint64_t) {});
    absl::Notification last;
    constexpr int kBatches = 20;
    for (int i = 0; i < kBatches; ++i) {
      Changes c;
      billing::Price price;
      price.set_gpu_model("H200");
      price.set_gpu_hour_micros(i);  // one price, set again and again: the last wins
      c.prices.push_back(price);
      billing::Plan plan;
      plan.set_tenant("t");
      plan.set_warn_micros(i);
      c.plans.push_back(plan);
      billing::LedgerEntry entry;
      entry.set_id(i + 1);
      entry.set_amount_micros(-i);
      c.ledger.push_back(entry);
      committer.Commit(std::move(c), {}, static_cast<uint64_t>(i + 1), [&, i](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        if (i == kBatches - 1) last.Notify();
      });
    }
    last.WaitForNotification();
  }
  absl::StatusOr<Store::Contents> contents = FakeStore(data).LoadAll();
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->prices.size(), 1u);
  EXPECT_EQ(contents->prices[0].gpu_hour_micros(), 19);
  ASSERT_EQ(contents->plans.size(), 1u);
  EXPECT_EQ(contents->plans[0].warn_micros(), 19);
  ASSERT_EQ(contents->ledger.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(contents->ledger[i].amount_micros(), -i);
}

}  // namespace
}  // namespace athanor::coord
