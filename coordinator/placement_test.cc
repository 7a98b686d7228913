#include "coordinator/placement.h"

#include <gtest/gtest.h>

namespace athanor::coord {
namespace {

TEST(PlaceGangTest, FirstFitTakesLowestFreeGpus) {
  std::vector<NodeCapacity> nodes = {{"a", 4, {1, 2, 3}}, {"b", 2, {0}}, {"c", 2, {0, 1}}};
  PlacementResult r = PlaceGang({2, 2}, nodes);
  auto* placed = std::get_if<std::vector<PlacementNode>>(&r);
  ASSERT_NE(placed, nullptr);
  ASSERT_EQ(placed->size(), 2u);
  EXPECT_EQ((*placed)[0].node, "a");
  EXPECT_EQ((*placed)[0].gpu_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ((*placed)[1].node, "c");
  EXPECT_EQ((*placed)[1].gpu_ids, (std::vector<int32_t>{0, 1}));
}

TEST(PlaceGangTest, AllOrNothing) {
  std::vector<NodeCapacity> nodes = {{"a", 2, {0, 1}}, {"b", 2, {1}}};
  PlacementResult r = PlaceGang({2, 2}, nodes);
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_EQ(std::get<std::string>(r),
            "waiting for 2 node(s) with 2 free GPU(s) each; 1 available now");
}

TEST(NeverFitsTest, Reasons) {
  EXPECT_EQ(NeverFitsReason({1, 4}, {2, 2}),
            "gpus_per_node=4 exceeds the largest node in the cluster (2 GPUs, 2 node(s) registered)");
  EXPECT_EQ(NeverFitsReason({3, 2}, {2, 2, 1}),
            "nodes=3 exceeds the 2 node(s) that have at least 2 GPUs");
  EXPECT_EQ(NeverFitsReason({2, 2}, {2, 2}), "");
  EXPECT_EQ(NeverFitsReason({1, 1}, {}),
            "gpus_per_node=1 exceeds the largest node in the cluster (0 GPUs, 0 node(s) registered)");
}

}  // namespace
}  // namespace athanor::coord
