#include "coordinator/scheduler/membership.h"

#include <gtest/gtest.h>

#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using testing::MakeNode;

TEST(MembershipTest, AllocatesLowestIdsAndReindexesByFreeCount) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 4), TimePoint{}).ok());
  ASSERT_NE(m.Bucket("H100", 4), nullptr);
  NodeAllocation alloc = m.Allocate(0, "j1", 3, 8, 1000);
  EXPECT_EQ(alloc, (NodeAllocation{"a", {0, 1, 2}}));
  EXPECT_EQ(m.Bucket("H100", 4), nullptr);
  ASSERT_NE(m.Bucket("H100", 1), nullptr);
  EXPECT_EQ(*m.Bucket("H100", 1), std::set<int>{0});
  EXPECT_EQ(m.node(0).free_cpus, 56);
  m.Release(0, "j1");
  EXPECT_EQ(m.node(0).free_gpus, 4);
  EXPECT_EQ(m.node(0).free_memory_mb, 512000);
}

TEST(MembershipTest, DrainingBecomesDrainedWhenEmptyAndLeavesTheIndex) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 2), TimePoint{}).ok());
  m.Allocate(0, "j1", 1, 0, 0);
  auto jobs = m.SetState("a", MemberState::kDraining);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(*jobs, std::vector<JobId>{"j1"});
  EXPECT_EQ(m.node(0).state, MemberState::kDraining);
  EXPECT_EQ(m.Bucket("H100", 1), nullptr);
  m.Release(0, "j1");
  EXPECT_EQ(m.node(0).state, MemberState::kDrained);
  EXPECT_EQ(m.Bucket("H100", 2), nullptr);
}

TEST(MembershipTest, RecordsHeartbeatsAndRefusesRemovingBusyNodes) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 2), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("b", 2), TimePoint{}).ok());
  ASSERT_TRUE(m.Heartbeat("b", TimePoint{} + std::chrono::seconds(20)).ok());
  EXPECT_EQ(m.node(0).last_heartbeat, TimePoint{});
  EXPECT_EQ(m.node(1).last_heartbeat, TimePoint{} + std::chrono::seconds(20));
  ASSERT_TRUE(m.SetState("a", MemberState::kDown).ok());  // NodeTable::Expire's part
  EXPECT_EQ(m.node(0).state, MemberState::kDown);
  EXPECT_EQ(m.node(1).state, MemberState::kUp);
  m.Allocate(1, "j", 1, 0, 0);
  EXPECT_EQ(m.RemoveNode("b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.registered(), 2);
  EXPECT_TRUE(m.RemoveNode("a").ok());
  EXPECT_EQ(m.Find("a"), std::nullopt);
  EXPECT_EQ(m.registered(), 1);  // DOWN counts, removed does not
  EXPECT_EQ(m.size(), 2);
  EXPECT_EQ(m.Heartbeat("zz", TimePoint{}).code(), absl::StatusCode::kNotFound);
}

TEST(MembershipTest, AllocateExactRefusesBusyGpus) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 4), TimePoint{}).ok());
  ASSERT_TRUE(m.AllocateExact(0, "j1", {1, 3}, 0, 0).ok());
  EXPECT_EQ(m.AllocateExact(0, "j2", {3}, 0, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.Allocate(0, "j2", 2, 0, 0), (NodeAllocation{"a", {0, 2}}));
}

}  // namespace
}  // namespace athanor::sched
