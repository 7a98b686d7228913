#include "checkpoint/checkpointer.h"

#include <gtest/gtest.h>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/fault_injecting_store.h"
#include "checkpoint/layout.h"

namespace athanor {
namespace {

using testing_util::FillRankState;
using testing_util::RankState;
using testing_util::RunRanks;

CheckpointerOptions Options(int rank, int world, Clock* clock) {
  CheckpointerOptions o;
  o.job = "job";
  o.rank = rank;
  o.world_size = world;
  o.clock = clock;
  return o;
}

TEST(Checkpointer, ThreeRanksWriteTheStableLayoutAndCommitOnce) {
  FakeObjectStore store;
  InProcessCommitBarrier barrier(3);
  FakeClock clock;
  std::vector<absl::Status> results(3);
  RunRanks(3, [&](int rank) {
    RankState s;
    FillRankState(&s, 10, rank, 3);
    Checkpointer ckpt(&store, &barrier, Options(rank, 3, &clock));
    absl::StatusOr<bool> started = ckpt.Save(10, s.state);
    if (!started.ok() || !*started) {
      results[rank] = absl::InternalError("save did not start");
      return;
    }
    results[rank] = ckpt.Wait();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  std::vector<std::string> keys;
  for (const auto& [k, v] : store.Objects()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "job/step-0000000010/COMMIT",
                      "job/step-0000000010/rank-00000-of-00003.safetensors",
                      "job/step-0000000010/rank-00000.json",
                      "job/step-0000000010/rank-00001-of-00003.safetensors",
                      "job/step-0000000010/rank-00001.json",
                      "job/step-0000000010/rank-00002-of-00003.safetensors",
                      "job/step-0000000010/rank-00002.json"}));
  auto committed = ListCommitted(&store, "job");
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0].step, 10);
  EXPECT_EQ((*committed)[0].world_size, 3);
  EXPECT_EQ((*committed)[0].commit_unix, 1'700'000'000);
  uint64_t shard_bytes = 0;
  for (const auto& [k, v] : store.Objects()) {
    if (k.find(".safetensors") != std::string::npos) shard_bytes += v.size();
  }
  EXPECT_EQ((*committed)[0].total_bytes, shard_bytes);
  EXPECT_EQ(FormatCommittedJson(*committed),
            "[{\"commit_unix\":1700000000,\"step\":10,\"total_bytes\":" + std::to_string(shard_bytes) +
                ",\"world_size\":3}]\n");
}

TEST(Checkpointer, AFailedShardMeansNoCommitOnAnyRank) {
  FakeObjectStore fake;
  FaultInjectingStore store(&fake);
  store.FailNthPut(1, "rank-00001-of");
  InProcessCommitBarrier barrier(2);
  FakeClock clock;
  std::vector<absl::Status> results(2);
  RunRanks(2, [&](int rank) {
    RankState s;
    FillRankState(&s, 3, rank, 2);
    Checkpointer ckpt(&store, &barrier, Options(rank, 2, &clock));
    ASSERT_TRUE(ckpt.Save(3, s.state).ok());
    results[rank] = ckpt.Wait();
    EXPECT_FALSE(ckpt.last_committed_step().has_value());
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kAborted) << results[0];
  EXPECT_EQ(results[1].code(), absl::StatusCode::kUnavailable) << results[1];
  EXPECT_EQ(fake.Objects().count(ckpt_layout::CommitKey("job", 3)), 0u);
  EXPECT_EQ(ListCommitted(&fake, "job")->size(), 0u);
}

// A barrier that holds the upload thread until the test releases it.
class GatedBarrier final : public CommitBarrier {
 public:
  absl::StatusOr<bool> AllDurable(int64_t, bool mine) override {
    std::unique_lock<std::mutex> lock(mu_);
    arrived_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return mine;
  }
  void WaitArrived() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return arrived_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool arrived_ = false;
  bool open_ = false;
};

TEST(Checkpointer, SkipPolicyDropsASaveWhileOneIsInFlight) {
  FakeObjectStore store;
  GatedBarrier barrier;
  FakeClock clock;
  CheckpointerOptions options = Options(0, 1, &clock);
  options.in_flight = InFlightPolicy::kSkip;
  Checkpointer ckpt(&store, &barrier, options);
  RankState s;
  FillRankState(&s, 1, 0, 1);
  ASSERT_EQ(*ckpt.Save(1, s.state), true);
  barrier.WaitArrived();
  // The caller may overwrite its tensors at once: Save copied them.
  FillRankState(&s, 2, 0, 1);
  EXPECT_EQ(*ckpt.Save(2, s.state), false);
  barrier.Open();
  EXPECT_TRUE(ckpt.Wait().ok());
  EXPECT_EQ(ckpt.last_committed_step(), 1);
  auto committed = ListCommitted(&store, "job");
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0].step, 1);
  EXPECT_EQ(*ckpt.Save(2, s.state), true);
  EXPECT_TRUE(ckpt.Wait().ok());
  EXPECT_EQ(ckpt.last_committed_step(), 2);
}

TEST(Checkpointer, InvalidStateIsRejectedBeforeAnythingIsStaged) {
  FakeObjectStore store;
  InProcessCommitBarrier barrier(1);
  Checkpointer ckpt(&store, &barrier, Options(0, 1, nullptr));
  float x[3] = {};
  TrainingState bad{{{"x", TensorDType::kF32, {4}, x, sizeof(x), {}}}, {}};
  EXPECT_EQ(ckpt.Save(1, bad).status().code(), absl::StatusCode::kInvalidArgument);
  TrainingState dup{{{"x", TensorDType::kF32, {3}, x, sizeof(x), {}}, {"x", TensorDType::kF32, {3}, x, sizeof(x), {}}}, {}};
  EXPECT_EQ(ckpt.Save(1, dup).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.Objects().empty());
}

TEST(Retention, KeepsTheLastKAndSweepsAbandonedWork) {
  FakeObjectStore store;
  InProcessCommitBarrier barrier(1);
  FakeClock clock;
  CheckpointerOptions options = Options(0, 1, &clock);
  options.retention.keep_last = 2;
  // Abandoned work from a crashed attempt: an uncommitted step and an upload.
  ASSERT_TRUE(store.Put("job/step-0000000002/rank-00000.json", "{}").ok());
  store.AddPendingUpload("job/step-0000000002/rank-00000-of-00001.safetensors");
  store.AddPendingUpload("job/step-0000000009/rank-00000-of-00001.safetensors");  // newer: kept
  Checkpointer ckpt(&store, &barrier, options);
  RankState s;
  for (int64_t step : {1, 3, 4, 5}) {
    FillRankState(&s, step, 0, 1);
    ASSERT_TRUE(ckpt.Save(step, s.state).ok());
    ASSERT_TRUE(ckpt.Wait().ok());
  }
  auto committed = ListCommitted(&store, "job");
  ASSERT_EQ(committed->size(), 2u);
  EXPECT_EQ((*committed)[0].step, 4);
  EXPECT_EQ((*committed)[1].step, 5);
  EXPECT_EQ(store.List("job/step-0000000002/")->size(), 0u);
  EXPECT_EQ(store.List("job/step-0000000003/")->size(), 0u);
  auto pending = store.ListPendingUploads("job/");
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().key, "job/step-0000000009/rank-00000-of-00001.safetensors");

  RetentionOptions keep_zero;
  keep_zero.keep_last = 0;  // still keeps the newest
  auto report = ApplyRetention(&store, "job", keep_zero);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->committed_deleted, 1);
  committed = ListCommitted(&store, "job");
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0].step, 5);
}

}  // namespace
}  // namespace athanor

namespace athanor {
namespace {

TEST(Retention, AbortsUploadsLeftInsideACommittedStep) {
  FakeObjectStore store;
  InProcessCommitBarrier barrier(1);
  FakeClock clock;
  CheckpointerOptions options = Options(0, 1, &clock);
  // A crashed earlier attempt at step 5 left a pending upload; step 5 then
  // commits (re-written by the resumed run), so nothing can finish that upload.
  store.AddPendingUpload("job/step-0000000005/rank-00000-of-00001.safetensors");
  store.AddPendingUpload("job/step-0000000006/rank-00000-of-00001.safetensors");  // newer: kept
  Checkpointer ckpt(&store, &barrier, options);
  RankState s;
  FillRankState(&s, 5, 0, 1);
  ASSERT_TRUE(ckpt.Save(5, s.state).ok());
  ASSERT_TRUE(ckpt.Wait().ok());
  auto pending = store.ListPendingUploads("job/");
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().key, "job/step-0000000006/rank-00000-of-00001.safetensors");
}

}  // namespace
}  // namespace athanor
