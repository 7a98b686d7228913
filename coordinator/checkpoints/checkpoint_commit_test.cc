#include "coordinator/checkpoints/checkpoint_commit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "checkpoint/builtin_stores.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/layout.h"
#include "checkpoint/shard_upload.h"

namespace athanor::coord {
namespace {

struct Reported {
  std::string job;
  int64_t step;
  int64_t commit_unix;
};

class CheckpointCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterBuiltinObjectStores();
    std::string tmpl = ::testing::TempDir() + "/commit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    uri_ = "file://" + tmpl;
    auto store = OpenObjectStore(uri_);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }
  // What a node checkpoint service leaves once rank `rank`'s shard is durable.
  void MakeDurable(int64_t step, int rank, int world) {
    testing_util::RankState s;
    testing_util::FillRankState(&s, step, rank, world);
    auto layout = PlanShard(s.state, step, rank, world);
    ASSERT_TRUE(layout.ok());
    std::string image(layout->total_size, '\0');
    image.replace(0, layout->header.size(), layout->header);
    std::vector<ShardSpec> specs;
    for (size_t i = 0; i < s.state.tensors.size(); ++i) {
      const TensorRef& t = s.state.tensors[i];
      image.replace(layout->data_start + layout->entries[i].begin, t.bytes,
                    static_cast<const char*>(t.data), t.bytes);
      specs.push_back(t.shard);
    }
    RankManifest m = PlanManifest("job", step, rank, world, *layout, specs);
    ASSERT_TRUE(UploadStagedShard(store_.get(), image.data(), 1 << 20, &m).ok());
  }
  std::unique_ptr<CheckpointCommitter> NewCommitter() {
    return std::make_unique<CheckpointCommitter>(
        [this](const std::string& job, int64_t step, int64_t unix) {
          reported_.push_back({job, step, unix});
        },
        &clock_);
  }

  std::string uri_;
  std::unique_ptr<ObjectStore> store_;
  FakeClock clock_;
  std::vector<Reported> reported_;
};

TEST_F(CheckpointCommitTest, CommitsOnlyOnceEveryShardIsDurable) {
  auto committer = NewCommitter();
  MakeDurable(10, 0, 3);
  MakeDurable(10, 2, 3);
  auto r = committer->CompleteSteps("job", uri_, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(store_->Head(ckpt_layout::CommitKey("job", 10)).status().code(),
            absl::StatusCode::kNotFound);
  MakeDurable(10, 1, 3);
  r = committer->CompleteSteps("job", uri_, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value_or(-1), 10);
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0].job, "job");
  EXPECT_EQ(reported_[0].step, 10);
  EXPECT_EQ(reported_[0].commit_unix, 1'700'000'000);
  auto commit = store_->Get(ckpt_layout::CommitKey("job", 10), 0, -1);
  ASSERT_TRUE(commit.ok());
  auto record = DecodeCommit(*commit);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->world_size, 3);
  EXPECT_EQ(record->shards.size(), 3u);
}

TEST_F(CheckpointCommitTest, ARestartedCoordinatorCommitsTheDurableStepExactlyOnce) {
  MakeDurable(4, 0, 2);
  MakeDurable(4, 1, 2);
  // The first coordinator died between "all durable" and COMMIT: it never ran.
  auto restarted = NewCommitter();
  auto r = restarted->CompleteSteps("job", uri_, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->value_or(-1), 4);
  auto first = store_->Get(ckpt_layout::CommitKey("job", 4), 0, -1);
  ASSERT_TRUE(first.ok());
  // Restarted again after the COMMIT: nothing new is written or reported.
  clock_.Advance(Seconds(60));
  auto again = NewCommitter();
  r = again->CompleteSteps("job", uri_, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(store_->Get(ckpt_layout::CommitKey("job", 4), 0, -1).value_or(""), *first);
  ASSERT_EQ(reported_.size(), 1u);
  // A commit lost between create-only put and report is idempotent too.
  EXPECT_TRUE(WriteCommit(store_.get(), "job", 4, 2, 1'700'000'999).ok());
  EXPECT_EQ(store_->Get(ckpt_layout::CommitKey("job", 4), 0, -1).value_or(""), *first);
}

TEST_F(CheckpointCommitTest, StepsOlderThanTheNewestCommitAreLeftToRetention) {
  auto committer = NewCommitter();
  MakeDurable(8, 0, 1);
  ASSERT_TRUE(WriteCommit(store_.get(), "job", 8, 1, 1).ok());
  MakeDurable(6, 0, 1);  // complete, but older than step 8's commit
  auto r = committer->CompleteSteps("job", uri_, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(store_->Head(ckpt_layout::CommitKey("job", 6)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(reported_.empty());
}

TEST_F(CheckpointCommitTest, RetentionRunsAfterACommitWithTheJobsKeepLast) {
  auto committer = NewCommitter();
  for (int64_t step : {2, 4, 6}) {
    MakeDurable(step, 0, 1);
    auto r = committer->CompleteSteps("job", uri_, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->value_or(-1), step);
  }
  EXPECT_EQ(store_->Head(ckpt_layout::CommitKey("job", 2)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->Head(ckpt_layout::CommitKey("job", 4)).ok());
  EXPECT_TRUE(store_->Head(ckpt_layout::CommitKey("job", 6)).ok());
}

}  // namespace
}  // namespace athanor::coord
