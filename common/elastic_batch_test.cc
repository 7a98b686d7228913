#include "common/elastic_batch.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(FitGlobalBatchTest, AccumulationAdaptsAndTheMicroBatchOnlyWhereItMust) {
  // 48 samples: 3 ranks x 8 x 2, then 2 ranks x 8 x 3 (micro kept), then 1 rank.
  absl::StatusOr<BatchShape> s = FitGlobalBatch(48, 3, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->micro_batch, 8);
  EXPECT_EQ(s->accum, 2);
  s = FitGlobalBatch(48, 2, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->micro_batch, 8);
  EXPECT_EQ(s->accum, 3);
  s = FitGlobalBatch(48, 1, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->micro_batch, 8);
  EXPECT_EQ(s->accum, 6);
  // 30 samples on 3 ranks: a share of 10 takes micro-batches of 5, twice.
  s = FitGlobalBatch(30, 3, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->micro_batch, 5);
  EXPECT_EQ(s->accum, 2);
  // A prime share: micro-batches of one.
  s = FitGlobalBatch(26, 2, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->micro_batch, 1);
  EXPECT_EQ(s->accum, 13);
  // A share under the micro-batch: one micro-batch of it.
  s = FitGlobalBatch(12, 4, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->micro_batch, 3);
  EXPECT_EQ(s->accum, 1);
}

TEST(FitGlobalBatchTest, RefusesWhatCannotBeSplit) {
  EXPECT_EQ(FitGlobalBatch(48, 5, 8).status().message(),
            "the global batch of 48 samples cannot be split over 5 ranks (not a multiple)");
  EXPECT_EQ(FitGlobalBatch(0, 1, 8).status().message(),
            "global batch 0, world 1, micro-batch 8: each must be at least 1");
  EXPECT_EQ(FitGlobalBatch(8, 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SizesBreakingGlobalBatchTest, ListsTheNodeCountsThatCannotKeepIt) {
  EXPECT_EQ(SizesBreakingGlobalBatch(48, 2, 3, 1), std::vector<int>{});
  EXPECT_EQ(SizesBreakingGlobalBatch(48, 1, 6, 2), std::vector<int>{5});
  EXPECT_EQ(SizesBreakingGlobalBatch(40, 2, 4, 2), (std::vector<int>{3}));
  EXPECT_EQ(SizesBreakingGlobalBatch(36, 2, 5, 4), (std::vector<int>{2, 4, 5}));
}

}  // namespace
}  // namespace athanor
