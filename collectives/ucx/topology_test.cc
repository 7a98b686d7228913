#include "collectives/ucx/topology.h"

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(Topology, GroupsRanksByHostInOrderOfTheirLowestRank) {
  // 1 + 1 + 2, hosts interleaved: c a b c.
  Topology t = MakeTopology({"c", "a", "b", "c"});
  ASSERT_EQ(t.num_hosts(), 3);
  EXPECT_EQ(t.hosts[0], (std::vector<int>{0, 3}));
  EXPECT_EQ(t.hosts[1], (std::vector<int>{1}));
  EXPECT_EQ(t.hosts[2], (std::vector<int>{2}));
  EXPECT_EQ(t.host_of, (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(t.local_index, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_EQ(t.max_local, 2);
  EXPECT_EQ(t.Layout(), "2+1+1");
}

TEST(Topology, EveryBlockHasOneOwnerOnEveryHost) {
  // 3 + 1: three blocks; host 0's ranks own one each, host 1's rank all three.
  Topology t = MakeTopology({"a", "a", "b", "a"});
  EXPECT_EQ(t.Layout(), "3+1");
  EXPECT_EQ(t.max_local, 3);
  EXPECT_EQ(t.Owner(0, 0), 0);
  EXPECT_EQ(t.Owner(0, 1), 1);
  EXPECT_EQ(t.Owner(0, 2), 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(t.Owner(1, b), 2);
}

TEST(Topology, OneHost) {
  Topology t = MakeTopology({"x", "x"});
  EXPECT_EQ(t.num_hosts(), 1);
  EXPECT_EQ(t.Layout(), "2");
}

TEST(Topology, HostIdentityNamesBootAndNetworkNamespace) {
  const std::string id = HostIdentity();
  // On Linux with /proc: "<boot id>/net:<inode>".
  EXPECT_NE(id.find("/net:"), std::string::npos) << id;
  EXPECT_EQ(id, HostIdentity());
}

}  // namespace
}  // namespace athanor
