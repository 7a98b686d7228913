#include "worker/data/text_dataset.h"

#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(TextDatasetTest, SamplesDependOnlyOnSeedStepAndIndex) {
  TextDataset data = TextDataset::FromString(SyntheticText(5000), 4);
  std::vector<uint8_t> all_ctx(8 * 4), all_tgt(8);
  data.Fill(9, 3, 0, 8, all_ctx.data(), all_tgt.data());
  // The same 8 samples fetched as two halves (two ranks or micro-batches).
  std::vector<uint8_t> ctx(4 * 4), tgt(4);
  for (int half = 0; half < 2; ++half) {
    data.Fill(9, 3, half * 4, 4, ctx.data(), tgt.data());
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(tgt[j], all_tgt[half * 4 + j]);
      for (int c = 0; c < 4; ++c) EXPECT_EQ(ctx[j * 4 + c], all_ctx[(half * 4 + j) * 4 + c]);
    }
  }
  std::vector<uint8_t> other_ctx(8 * 4), other_tgt(8);
  data.Fill(9, 4, 0, 8, other_ctx.data(), other_tgt.data());
  EXPECT_NE(other_ctx, all_ctx);
}

TEST(TextDatasetTest, TargetFollowsContextInText) {
  TextDataset data = TextDataset::FromString("abcdefghij", 3);
  std::vector<uint8_t> ctx(3 * 20), tgt(20);
  data.Fill(1, 0, 0, 20, ctx.data(), tgt.data());
  for (int j = 0; j < 20; ++j) {
    EXPECT_EQ(ctx[j * 3 + 1], ctx[j * 3] + 1);
    EXPECT_EQ(ctx[j * 3 + 2], ctx[j * 3] + 2);
    EXPECT_EQ(tgt[j], ctx[j * 3] + 3);
    EXPECT_LE(tgt[j], 'j');
  }
}

TEST(TextDatasetTest, LoadErrors) {
  EXPECT_EQ(TextDataset::Load("/nonexistent/file", 4).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(TextDataset::Load("synthetic:abc", 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TextDataset::Load("synthetic:5", 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<TextDataset> ok = TextDataset::Load("synthetic:1000", 4);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 1000u);
  EXPECT_EQ(SyntheticText(100), SyntheticText(100));
}

}  // namespace
}  // namespace athanor
