#include "worker/train/optimizer.h"

#include <cmath>
#include <limits>

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

TEST(OptimizerTest, ClipGradNormScalesToTheLimitAndReturnsTheNormBefore) {
  float g[3] = {3.0f, 0.0f, -4.0f};
  EXPECT_EQ(ClipGradNorm(g, 3, 1.0f), 5.0);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);  // x 1/(5 + 1e-6), as torch
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_NEAR(g[2], -0.8f, 1e-6);
  float small[2] = {0.3f, 0.4f};
  EXPECT_FLOAT_EQ(ClipGradNorm(small, 2, 1.0f), 0.5f);
  EXPECT_EQ(small[0], 0.3f);  // under the limit: untouched, bit for bit
  EXPECT_EQ(small[1], 0.4f);
  float inf[2] = {std::numeric_limits<float>::infinity(), 1.0f};
  EXPECT_TRUE(std::isinf(ClipGradNorm(inf, 2, 1.0f)));
  EXPECT_EQ(inf[1], 1.0f);  // an overflow is left for the loss scaler
}

TEST(OptimizerTest, DefaultsAreAdamWAndEachKindHasItsOwnLearningRate) {
  OptimizerOptions o;
  EXPECT_EQ(o.kind, "adamw");
  EXPECT_EQ(o.lr, DefaultLearningRate("adamw"));
  EXPECT_EQ(DefaultLearningRate("adamw"), kAdamWDefaultLr);
  EXPECT_EQ(DefaultLearningRate("sgd"), kSgdDefaultLr);
  EXPECT_EQ(DefaultLearningRate("lion"), 0.0f);
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
