#include "worker/train/train_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace athanor {
namespace {

absl::Status Parse(std::vector<std::string> args, TrainFlags* flags) {
  args.insert(args.begin(), "athanor-train");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseTrainFlags(static_cast<int>(argv.size()), argv.data(), flags);
}

TEST(TrainFlagsTest, DefaultsAreAdamWWithItsLearningRateAndClipping) {
  TrainFlags f;
  ASSERT_TRUE(Parse({}, &f).ok());
  EXPECT_EQ(f.trainer.optimizer.kind, "adamw");
  EXPECT_EQ(f.trainer.optimizer.lr, 1e-3f);
  EXPECT_EQ(f.trainer.clip_grad_norm, 1.0f);
}

TEST(TrainFlagsTest, TheLearningRateDefaultsPerOptimizerUnlessGiven) {
  TrainFlags sgd;
  ASSERT_TRUE(Parse({"--optimizer", "sgd"}, &sgd).ok());
  EXPECT_EQ(sgd.trainer.optimizer.lr, 0.02f);
  TrainFlags given;
  ASSERT_TRUE(Parse({"--optimizer", "sgd", "--lr", "0.05", "--clip-grad-norm", "0"}, &given).ok());
  EXPECT_EQ(given.trainer.optimizer.lr, 0.05f);
  EXPECT_EQ(given.trainer.clip_grad_norm, 0.0f);
}

TEST(TrainFlagsTest, RejectsBadOptimizerLrAndClip) {
  TrainFlags a, b, c;
  absl::Status s = Parse({"--optimizer", "lion"}, &a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--optimizer must be adamw or sgd, not 'lion'");
  s = Parse({"--lr", "0"}, &b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--lr must be > 0");
  s = Parse({"--clip-grad-norm", "-1"}, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--clip-grad-norm must be a finite value >= 0 (0: off)");
}

}  // namespace
}  // namespace athanor
