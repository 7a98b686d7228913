#include "common/elastic_batch.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(FitGlobalBatchTest, AccumulationAdaptsAndTheMicroBatchOnlyWhereItMust) {
  struct Case {
    int64_t global;
    int world, max_micro, micro, accum;
  };
  const Case cases[] = {
      {48, 3, 8, 8, 2},   // 3 ranks x 8 x 2
      {48, 2, 8, 8, 3},   // one rank fewer: the micro-batch kept, one more step of accumulation
      {48, 1, 8, 8, 6},
      {30, 3, 8, 5, 2},   // a share of 10: micro-batches of 5, twice
      {26, 2, 8, 1, 13},  // a prime share: micro-batches of one
      {12, 4, 8, 3, 1},   // a share under the micro-batch: one micro-batch of it
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.global << " on " << c.world << " ranks");
    absl::StatusOr<BatchShape> s = FitGlobalBatch(c.global, c.world, c.max_micro);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->micro_batch, c.micro);
    EXPECT_EQ(s->accum, c.accum);
  }
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
