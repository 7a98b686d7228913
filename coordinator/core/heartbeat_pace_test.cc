// HeartbeatPace: the interval and DOWN timeout as the fleet grows, and
// ClusterState marking a silent node DOWN after the stretched timeout only.
#include "coordinator/health/heartbeat_pace.h"

#include <gtest/gtest.h>

#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

TEST(HeartbeatPaceTest, IntervalStretchesToNodesOverTheRateAndTimeoutInProportion) {
  HeartbeatPace pace(Millis(1000), Seconds(10), 2000);
  EXPECT_EQ(pace.Interval(), Millis(1000));  // no nodes yet
  pace.SetNodes(1500);
  EXPECT_EQ(pace.Interval(), Millis(1000));  // 0.75 s < the base
  EXPECT_EQ(pace.Timeout(), Seconds(10));
  pace.SetNodes(2000);
  EXPECT_EQ(pace.Interval(), Millis(1000));
  pace.SetNodes(10000);
  EXPECT_EQ(pace.Interval(), Millis(5000));  // 2,000 heartbeats a second
  EXPECT_EQ(pace.Timeout(), Seconds(50));    // still ten intervals
  pace.SetNodes(-3);
  EXPECT_EQ(pace.nodes(), 0);
  HeartbeatPace fixed(Millis(500), Seconds(4), 0);
  fixed.SetNodes(1000000);
  EXPECT_EQ(fixed.Interval(), Millis(500));
  EXPECT_EQ(fixed.Timeout(), Seconds(4));
}

TEST(HeartbeatPaceTest, SilentNodeGoesDownAfterTheStretchedTimeoutOnly) {
  FakeClock clock;
  // At most 1 heartbeat a second: three nodes heartbeat every 3 s, and a
  // node is DOWN after 30 s of silence instead of 10.
  HeartbeatPace pace(Millis(1000), Seconds(10), 1);
  StateOptions o;
  o.heartbeat_pace = &pace;
  ClusterState state(o, &clock);
  for (const char* name : {"n1", "n2", "n3"}) {
    NodeRecord n;
    n.name = name;
    n.host = name;
    n.inventory.gpus = 1;
    ASSERT_TRUE(state.agents().Register(n, {}).ok());
  }
  state.Tick();
  EXPECT_EQ(pace.nodes(), 3);
  EXPECT_EQ(pace.Interval(), Millis(3000));
  EXPECT_EQ(pace.Timeout(), Seconds(30));
  for (int s = 0; s < 29; ++s) {
    clock.Advance(Seconds(1));
    ASSERT_TRUE(state.agents().Heartbeat("n1", state.log().generation(), {}));
    state.Tick();
  }
  EXPECT_EQ(state.nodes().Get("n2")->state, NodeState::kUp);  // silent 29 s
  clock.Advance(Seconds(2));
  ASSERT_TRUE(state.agents().Heartbeat("n1", state.log().generation(), {}));
  state.Tick();
  EXPECT_EQ(state.nodes().Get("n2")->state, NodeState::kDown);  // silent 31 s
  EXPECT_EQ(state.nodes().Get("n3")->state, NodeState::kDown);
  EXPECT_EQ(state.nodes().Get("n1")->state, NodeState::kUp);
}

}  // namespace
}  // namespace athanor::coord
