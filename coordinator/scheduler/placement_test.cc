#include "coordinator/scheduler/placement.h"

#include <gtest/gtest.h>

#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;

std::vector<std::string> Names(const Membership& m, const PlacementResult& r) {
  std::vector<std::string> names;
  for (int i : r.nodes) names.push_back(m.node(i).spec.name);
  return names;
}

TEST(PlacementTest, BestFitPrefersTheNodeWithFewestFreeGpus) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("big", 8), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("mid", 4), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("small", 2), TimePoint{}).ok());
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("j", 1, 2), nullptr)), std::vector<std::string>{"small"});
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("j", 1, 3), nullptr)), std::vector<std::string>{"mid"});
  m.Allocate(0, "x", 5, 0, 0);  // big now has 3 free: the best fit for 3
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("j", 1, 3), nullptr)), std::vector<std::string>{"big"});
  EXPECT_FALSE(PlaceLive(m, MakeJob("j", 1, 5), nullptr).ok());
}

TEST(PlacementTest, HonoursModelMemoryCpuAndRam) {
  Membership m;
  NodeSpec a100 = MakeNode("a100", 2, "A100");
  a100.gpu_memory_mb = 40000;
  ASSERT_TRUE(m.AddNode(a100, TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("h100", 8), TimePoint{}).ok());
  JobRequest job = MakeJob("j", 1, 1);
  job.gpu_model = "H100";
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"h100"});
  job.gpu_model = "";
  job.min_gpu_memory_mb = 60000;
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"h100"});
  job.min_gpu_memory_mb = 0;
  job.cpus_per_node = 65;
  EXPECT_FALSE(PlaceLive(m, job, nullptr).ok());
  job.cpus_per_node = 0;
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"a100"});
}

TEST(PlacementTest, GangStaysOnOneSwitchWhenPossible) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("n0", 8, "H100", "s1", "r1"), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("n1", 8, "H100", "s2", "r1"), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("n2", 8, "H100", "s2", "r1"), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("n3", 8, "H100", "s3", "r2"), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("n4", 8, "H100", "s3", "r2"), TimePoint{}).ok());
  m.Allocate(3, "x", 4, 0, 0);  // s3 would leave 4+8 idle, s2 16: s3 is the tighter fit
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("g", 2, 4), nullptr)),
            (std::vector<std::string>{"n3", "n4"}));
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("g", 2, 8), nullptr)),
            (std::vector<std::string>{"n1", "n2"}));
  // Three nodes of 8: no switch has three, rack r1 does.
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("g", 3, 8), nullptr)),
            (std::vector<std::string>{"n0", "n1", "n2"}));
  EXPECT_FALSE(PlaceLive(m, MakeJob("g", 5, 8), nullptr).ok());
  EXPECT_EQ(PlaceLive(m, MakeJob("g", 5, 8), nullptr).eligible, 4);
}

TEST(PlacementTest, CapsLimitWhatAJobMayTake) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 2), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("b", 4), TimePoint{}).ok());
  NodeCaps caps{{0, Resources{0, 64, 512000}}};
  EXPECT_EQ(Names(m, PlaceLive(m, MakeJob("j", 1, 1), &caps)), std::vector<std::string>{"b"});
}

// Among equally good fits, a node whose agent caches the job's image wins;
// it never beats a better fit, and without an image the lowest index wins.
TEST(PlacementTest, AnEqualFitWithTheImageCachedWins) {
  Membership m;
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(m.AddNode(MakeNode(name, 4), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("small", 2), TimePoint{}).ok());
  const std::string digest = "sha256:" + std::string(64, 'a');
  ASSERT_TRUE(m.SetCachedImages("c", {"sha256:" + std::string(64, 'b'), digest}).ok());
  JobRequest job = MakeJob("j", 1, 3);
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"a"});
  job.image_digest = digest;
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"c"});
  job.image_digest = "sha256:" + std::string(64, 'c');  // cached nowhere
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"a"});
  // A better fit (2 free for 2 GPUs) beats the cache.
  job = MakeJob("j", 1, 2);
  job.image_digest = digest;
  EXPECT_EQ(Names(m, PlaceLive(m, job, nullptr)), std::vector<std::string>{"small"});
  EXPECT_EQ(m.SetCachedImages("nope", {}).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace athanor::sched
