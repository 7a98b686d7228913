#include "worker/train/optimizer.h"

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(OptimizerTest, SgdMomentumMatchesHandComputation) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1f;
  o.momentum = 0.9f;
  auto opt = CreateOptimizer(o, 2);
  ASSERT_TRUE(opt.ok()) << opt.status();
  float p[2] = {1.0f, 2.0f};
  const float g[2] = {0.5f, -1.0f};
  (*opt)->Step(p, g);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 2.1f);
  (*opt)->Step(p, g);  // v = 0.9 v + g = (0.95, -1.9)
  EXPECT_FLOAT_EQ(p[0], 0.855f);
  EXPECT_FLOAT_EQ(p[1], 2.29f);
  EXPECT_EQ((*opt)->steps(), 2);
  ASSERT_EQ((*opt)->State().size(), 1u);
  EXPECT_EQ((*opt)->State()[0].first, "momentum");
  EXPECT_FLOAT_EQ((*opt)->State()[0].second[1], -1.9f);
}

TEST(OptimizerTest, AdamWFirstStepsMoveByLrTimesSign) {
  OptimizerOptions o;
  o.kind = "adamw";
  o.lr = 0.1f;
  o.weight_decay = 0.01f;
  auto opt = CreateOptimizer(o, 2);
  ASSERT_TRUE(opt.ok()) << opt.status();
  float p[2] = {1.0f, -1.0f};
  const float g[2] = {0.5f, -2.0f};
  (*opt)->Step(p, g);
  // Bias-corrected m/sqrt(v) = sign(g) on step 1; decay multiplies by 1 - lr*wd.
  EXPECT_NEAR(p[0], 1.0f * 0.999f - 0.1f, 1e-6);
  EXPECT_NEAR(p[1], -1.0f * 0.999f + 0.1f, 1e-6);
  (*opt)->Step(p, g);  // constant gradient: still exactly sign(g) after correction
  EXPECT_NEAR(p[0], (0.999f - 0.1f) * 0.999f - 0.1f, 1e-6);
  EXPECT_EQ((*opt)->State()[1].first, "exp_avg_sq");
}

TEST(OptimizerTest, RejectsUnknownKindAndBadLr) {
  OptimizerOptions o;
  o.kind = "lion";
  EXPECT_EQ(CreateOptimizer(o, 1).status().code(), absl::StatusCode::kInvalidArgument);
  o.kind = "sgd";
  o.lr = 0.0f;
  EXPECT_EQ(CreateOptimizer(o, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor
