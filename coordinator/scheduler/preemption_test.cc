#include "coordinator/scheduler/preemption.h"

#include <gtest/gtest.h>

#include <random>

#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using testing::MakeJob;
using testing::MakeNode;

struct Case {
  Membership members;
  std::vector<PreemptionCandidate> candidates;
};

// Fills nodes with random single- and two-node jobs; all become candidates.
Case RandomCase(std::mt19937& rng) {
  Case c;
  int nodes = 2 + rng() % 3;
  for (int i = 0; i < nodes; ++i) {
    EXPECT_TRUE(c.members.AddNode(MakeNode(absl::StrCat("n", i), 2 + rng() % 3), TimePoint{}).ok());
  }
  for (int j = 0; j < 7; ++j) {
    int span = 1 + rng() % 2;
    int gpus = 1 + rng() % 2;
    std::vector<int> chosen;
    for (int i = 0; i < nodes && static_cast<int>(chosen.size()) < span; ++i) {
      int node = (i + static_cast<int>(rng() % nodes)) % nodes;
      if (c.members.node(node).free_gpus >= gpus &&
          std::find(chosen.begin(), chosen.end(), node) == chosen.end()) {
        chosen.push_back(node);
      }
    }
    if (static_cast<int>(chosen.size()) < span) continue;
    PreemptionCandidate cand;
    cand.job = absl::StrCat("v", j);
    cand.gpus = gpus * span;
    cand.lost_gpu_us = static_cast<int64_t>(rng() % 5) * cand.gpus;
    for (int node : chosen) {
      c.members.Allocate(node, cand.job, gpus, 0, 0);
      cand.holds.emplace_back(node, Resources{gpus, 0, 0});
    }
    c.candidates.push_back(cand);
  }
  return c;
}

TEST(PreemptionTest, ExactSearchMatchesBruteForce) {
  std::mt19937 rng(20261130);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Case c = RandomCase(rng);
    JobRequest job = MakeJob("head", 1 + rng() % 2, 1 + rng() % 3);
    std::vector<Resources> base(c.members.size());
    for (int i = 0; i < c.members.size(); ++i) base[i] = FreeOf(c.members.node(i));
    // Brute force over every subset.
    std::optional<std::pair<int64_t, int>> best;
    const size_t n = c.candidates.size();
    for (uint32_t mask = 0; mask < (1u << n); ++mask) {
      std::vector<Resources> free = base;
      int64_t lost = 0;
      int gpus = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!(mask >> i & 1)) continue;
        lost += c.candidates[i].lost_gpu_us;
        gpus += c.candidates[i].gpus;
        for (const auto& [node, hold] : c.candidates[i].holds) free[node] += hold;
      }
      if (!PlaceProjected(c.members, job, free).ok()) continue;
      if (!best || std::make_pair(lost, gpus) < *best) best = std::make_pair(lost, gpus);
    }
    auto plan = PlanPreemption(c.members, job, base, c.candidates, 16);
    ASSERT_EQ(plan.has_value(), best.has_value()) << "trial " << trial;
    if (!plan) continue;
    ++compared;
    EXPECT_EQ(plan->lost_gpu_us, best->first) << "trial " << trial;
    EXPECT_EQ(plan->gpus_freed, best->second) << "trial " << trial;
    // Greedy is not optimal, but must be feasible and minimal.
    auto greedy = PlanPreemption(c.members, job, base, c.candidates, 0);
    ASSERT_TRUE(greedy.has_value());
    EXPECT_GE(greedy->lost_gpu_us, plan->lost_gpu_us);
  }
  EXPECT_GT(compared, 200);
}

TEST(PreemptionTest, PicksTheVictimThatLosesLeastWork) {
  Membership m;
  ASSERT_TRUE(m.AddNode(MakeNode("a", 4), TimePoint{}).ok());
  ASSERT_TRUE(m.AddNode(MakeNode("b", 4), TimePoint{}).ok());
  m.Allocate(0, "old_ckpt", 4, 0, 0);
  m.Allocate(1, "fresh_ckpt", 4, 0, 0);
  std::vector<PreemptionCandidate> c = {
      {"old_ckpt", 4 * 600'000'000LL, 4, {{0, {4, 0, 0}}}},
      {"fresh_ckpt", 4 * 5'000'000LL, 4, {{1, {4, 0, 0}}}},
  };
  std::vector<Resources> base = {FreeOf(m.node(0)), FreeOf(m.node(1))};
  auto plan = PlanPreemption(m, MakeJob("h", 1, 4), base, c, 16);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->victims, std::vector<JobId>{"fresh_ckpt"});
  EXPECT_EQ(plan->lost_gpu_us, 20'000'000);
  EXPECT_FALSE(PlanPreemption(m, MakeJob("h", 3, 4), base, c, 16).has_value());
}

}  // namespace
}  // namespace athanor::sched
