// Job networks (--job-network): the /24 allocator, and what ClusterState
// makes of it: each attempt its own /24, rank 0's address as MASTER_ADDR,
// every node's address and host in its desired ranks, the /24 freed when the
// attempt ends and held again by a restarted coordinator.
#include "coordinator/core/job_network.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

TEST(ParseJobNetworkTest, AcceptsAlignedSlash8To24AndSaysWhatIsWrongOtherwise) {
  absl::StatusOr<JobNetworkRange> r = ParseJobNetwork("10.64.0.0/10");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->base, 0x0a400000u);
  EXPECT_EQ(r->prefix, 10);
  EXPECT_EQ(ParseJobNetwork("10.64.0.0").status().message(), "--job-network: '10.64.0.0' is not an IPv4 A.B.C.D/P");
  EXPECT_EQ(ParseJobNetwork("10.64.0.0/25").status().message(),
            "--job-network: /25 must be /8 to /24 (each job attempt gets a /24 of it)");
  EXPECT_EQ(ParseJobNetwork("10.64.0.1/16").status().message(),
            "--job-network: '10.64.0.1/16' has bits set past /16 (the network is 10.64.0.0/16)");
  EXPECT_EQ(ParseJobNetwork("10.256.0.0/16").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobNetworksTest, HandsOutEachSlash24OnceRoundRobinAndNoneWhenAllAreHeld) {
  JobNetworks n("10.9.0.0/23");  // two /24s
  EXPECT_EQ(n.Allocate(), "10.9.0.0");
  EXPECT_EQ(n.Allocate(), "10.9.1.0");
  EXPECT_EQ(n.Allocate(), std::nullopt);
  n.Release("10.9.0.0");
  EXPECT_EQ(n.Allocate(), "10.9.0.0");
  n.Release("10.9.1.0");
  n.Hold("10.9.1.0");  // a restored attempt's
  n.Hold("10.10.0.0");  // not of this range: ignored
  EXPECT_EQ(n.held(), 2u);
  EXPECT_EQ(JobNetworks::Address("10.9.1.0", 0), "10.9.1.1");
  EXPECT_EQ(JobNetworks::Address("10.9.1.0", 253), "10.9.1.254");
  EXPECT_EQ(JobNetworks::Address("10.9.1.0", 254), "");
  JobNetworks off("");
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.Allocate(), std::nullopt);
}

class JobNetworkStateTest : public ::testing::Test {
 protected:
  static StateOptions Options() {
    StateOptions o;
    o.job_network = "10.64.0.0/23";
    return o;
  }
  void SetUp() override {
    state_ = std::make_unique<ClusterState>(Options(), &clock_);
    for (const char* name : {"n1", "n2", "n3", "n4"}) {
      NodeRecord n;
      n.name = name;
      n.host = absl::StrCat("192.0.2.", name[1] - '0');
      n.inventory.gpus = 1;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
  }
  std::string Submit(int32_t nodes) {
    JobSpec s;
    s.nodes = nodes;
    s.gpus_per_node = 1;
    s.command = {"train"};
    absl::StatusOr<SubmitResult> r = state_->SubmitJob(s);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job_id : "";
  }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(JobNetworkStateTest, EachAttemptGetsItsOwnSlash24AndItsRanksSeeEveryPeer) {
  const std::string a = Submit(2), b = Submit(2);
  const JobRecord& ja = *state_->jobs().Find(a);
  const JobRecord& jb = *state_->jobs().Find(b);
  EXPECT_EQ(ja.network_subnet, "10.64.0.0");
  EXPECT_EQ(jb.network_subnet, "10.64.1.0");
  EXPECT_EQ(ja.master_addr, "10.64.0.1");
  const std::string node1 = ja.allocation[1].node;
  std::vector<DesiredRank> desired = ClusterAgents::DesiredFor(*state_, node1);
  ASSERT_EQ(desired.size(), 1u);
  const DesiredRank& d = desired[0];
  EXPECT_EQ(d.env.at("MASTER_ADDR"), "10.64.0.1");
  ASSERT_TRUE(d.network.has_value());
  EXPECT_EQ(d.network->address, "10.64.0.2");
  EXPECT_EQ(d.network->prefix_length, 24);
  ASSERT_EQ(d.network->peers.size(), 2u);
  EXPECT_EQ(d.network->peers[0].address, "10.64.0.1");
  EXPECT_EQ(d.network->peers[0].host, state_->nodes().Get(ja.allocation[0].node)->host);
  EXPECT_EQ(d.network->peers[1].address, "10.64.0.2");
  EXPECT_EQ(d.network->peers[1].host, state_->nodes().Get(node1)->host);

  // The first attempt ends: its /24 is the next one handed out.
  ASSERT_TRUE(state_->CancelJob(a).ok());
  for (const RankPlacement& p : ja.allocation) {
    RankReport r;
    r.job_id = a;
    r.attempt = 1;
    r.rank = p.rank;
    r.phase = RankPhase::kExited;
    r.exit_code = 143;
    r.signal = 15;
    r.signal_from_agent = true;
    ASSERT_TRUE(state_->agents().Heartbeat(p.node, state_->log().generation(), {r}));
  }
  ASSERT_EQ(state_->jobs().Find(a)->state, JobState::kCancelled);
  const std::string c = Submit(2);
  EXPECT_EQ(state_->jobs().Find(c)->network_subnet, "10.64.0.0");
}

TEST_F(JobNetworkStateTest, ARestartedCoordinatorHoldsTheLiveAttemptsSlash24sAgain) {
  const std::string a = Submit(2);
  std::vector<JobRecord> jobs = {*state_->jobs().Find(a)};
  std::vector<NodeRecord> nodes;
  for (const NodeView& v : state_->nodes().Views()) nodes.push_back(v.record);
  ClusterState restarted(Options(), &clock_);
  restarted.Restore(jobs, nodes);
  for (const NodeRecord& n : nodes) ASSERT_TRUE(restarted.agents().Register(n, {}).ok());
  JobSpec s;
  s.nodes = 2;
  s.gpus_per_node = 1;
  s.command = {"train"};
  absl::StatusOr<SubmitResult> b = restarted.SubmitJob(s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(restarted.jobs().Find(b->job_id)->network_subnet, "10.64.1.0");
}

TEST_F(JobNetworkStateTest, AnAttemptPlacedWithEverySlash24HeldIsToldThereIsNone) {
  Submit(1);
  Submit(1);
  const std::string c = Submit(2);  // both /24s are held
  const JobRecord& jc = *state_->jobs().Find(c);
  EXPECT_EQ(jc.network_subnet, "none");
  std::vector<DesiredRank> desired = ClusterAgents::DesiredFor(*state_, jc.allocation[0].node);
  const DesiredRank* d = nullptr;
  for (const DesiredRank& r : desired) d = r.job_id == c ? &r : d;
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->network.has_value());
  EXPECT_EQ(d->network->address, "");  // the agent refuses the rank, saying why
}

TEST_F(JobNetworkStateTest, AttemptsPlacedWithoutANetworkRunOnWithoutOne) {
  StateOptions off;
  ClusterState plain(off, &clock_);
  NodeRecord n;
  n.name = "n1";
  n.host = "192.0.2.1";
  n.inventory.gpus = 1;
  ASSERT_TRUE(plain.agents().Register(n, {}).ok());
  JobSpec s;
  s.nodes = 1;
  s.gpus_per_node = 1;
  s.command = {"train"};
  const std::string id = plain.SubmitJob(s)->job_id;
  std::vector<JobRecord> jobs = {*plain.jobs().Find(id)};
  ClusterState restarted(Options(), &clock_);  // now with --job-network
  restarted.Restore(jobs, {n});
  ASSERT_TRUE(restarted.agents().Register(n, {}).ok());
  std::vector<DesiredRank> desired = ClusterAgents::DesiredFor(restarted, "n1");
  ASSERT_EQ(desired.size(), 1u);
  EXPECT_FALSE(desired[0].network.has_value());
  EXPECT_EQ(desired[0].env.at("MASTER_ADDR"), "192.0.2.1");
}

TEST_F(JobNetworkStateTest, MoreNodesThanASlash24HoldsAreRefusedAtSubmit) {
  JobSpec s;
  s.nodes = 255;
  s.gpus_per_node = 1;
  s.command = {"train"};
  absl::StatusOr<SubmitResult> r = state_->SubmitJob(s);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "nodes: 255 nodes is more than a job network holds (each attempt gets a /24 of --job-network, one "
            "address per node): at most 254");
}

}  // namespace
}  // namespace athanor::coord
