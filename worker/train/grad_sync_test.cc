#include "worker/train/grad_sync.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "worker/train/testing/recording_communicator.h"

namespace athanor {
namespace {

TEST(GradSyncTest, BucketsLaunchAsTheirPrefixBecomesFinal) {
  RecordingCommunicator comm(2);
  GradSyncOptions o;
  o.first_bucket_bytes = 400;  // 100 f32
  o.bucket_bytes = 1200;       // 300 f32
  o.tag_base = 50;
  GradSync sync(&comm, 1000, o);
  EXPECT_EQ(sync.bounds(), (std::vector<size_t>{0, 100, 400, 700, 1000}));
  EXPECT_EQ(sync.wire_bytes(), 4000u);

  std::vector<float> g(1000);
  std::iota(g.begin(), g.end(), 0.0f);
  sync.Begin(g.data());
  sync.OnPrefixFinal(350);
  ASSERT_EQ(comm.calls().size(), 1u);
  EXPECT_EQ(comm.calls()[0].tag, 50u);
  EXPECT_EQ(comm.calls()[0].count, 100u);
  sync.OnPrefixFinal(700);
  ASSERT_EQ(comm.calls().size(), 3u);
  EXPECT_EQ(comm.calls()[2].tag, 52u);
  EXPECT_EQ(comm.calls()[2].send, g.data() + 400);
  double wait = -1;
  ASSERT_TRUE(sync.Finish(&wait).ok());
  ASSERT_EQ(comm.calls().size(), 4u);
  EXPECT_EQ(comm.calls()[3].tag, 53u);
  EXPECT_EQ(comm.calls()[3].count, 300u);
  EXPECT_GE(wait, 0.0);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(g[i], 2.0f * i) << i;
}

TEST(GradSyncTest, HalfWireRoundTripsThroughStaging) {
  RecordingCommunicator comm(3);
  GradSyncOptions o;
  o.wire = Precision::kBF16;
  o.first_bucket_bytes = 4;  // 2 bf16
  o.bucket_bytes = 8;        // 4 bf16
  GradSync sync(&comm, 7, o);
  EXPECT_EQ(sync.bounds(), (std::vector<size_t>{0, 2, 6, 7}));
  EXPECT_EQ(sync.wire_bytes(), 14u);
  std::vector<float> g = {1.0f, -2.0f, 0.5f, 3.0f, 1.0f + 1.0f / 256, 10.0f, -0.25f};
  sync.Begin(g.data());
  double wait = 0;
  ASSERT_TRUE(sync.Finish(&wait).ok());
  ASSERT_EQ(comm.calls().size(), 3u);
  EXPECT_EQ(comm.calls()[0].type, DataType::kBF16);
  // 1 + 2^-8 rounds to 1 in bf16 on the wire, then 3x.
  EXPECT_EQ(g, (std::vector<float>{3.0f, -6.0f, 1.5f, 9.0f, 3.0f, 30.0f, -0.75f}));
}

TEST(GradSyncTest, WorldOfOneNeedsNoCommunicator) {
  GradSyncOptions o;
  o.wire = Precision::kF16;
  GradSync sync(nullptr, 3, o);
  std::vector<float> g = {1.0f, 70000.0f, 0.1f};
  sync.Begin(g.data());
  sync.OnPrefixFinal(3);
  double wait = 0;
  ASSERT_TRUE(sync.Finish(&wait).ok());
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_TRUE(std::isinf(g[1]));  // f16 wire overflows exactly as with peers
  EXPECT_EQ(g[2], RoundTo(Precision::kF16, 0.1f));
}

}  // namespace
}  // namespace athanor
