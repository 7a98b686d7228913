// The coordinator-side findings of an outside attack, as a tenant with a
// valid token and with one node's agent certificate, each on a real secure
// cluster (coordinator and agents as processes, mutual TLS; the harness's
// watchdog bounds every step):
//   - a tenant's own stopped processes, at a short hang timeout, drained a node;
//   - a node's heartbeat ended another node's rank (placement was not checked);
//   - `athanor nodes` showed every tenant every other tenant's job ids;
//   - a tenant's pending jobs had no cap;
//   - a node with one rank of a job reported another rank's checkpoint shard.
// Each expects the exact status, message or state the coordinator gives now.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "security/cluster_ca.h"
#include "security/tls.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

void Deadline(grpc::ClientContext* c, int seconds = 10) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

std::string Code(const grpc::Status& s) {
  return s.ok() ? "OK" : absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()));
}

// Submits `spec` as `token`; the job id ("" on failure, with `status` set).
std::string Submit(LocalCluster& cluster, const std::string& token, const rpc::JobSpec& spec,
                   grpc::Status* status = nullptr) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  rpc::SubmitJobResponse resp;
  grpc::Status s = (token.empty() ? cluster.stub() : *cluster.CoordinatorStubAs(token)).SubmitJob(&c, req, &resp);
  if (status != nullptr) *status = s;
  return s.ok() ? resp.job_id() : "";
}

rpc::JobSpec Spec(std::vector<std::string> command, int nodes = 1) {
  rpc::JobSpec spec;
  spec.set_nodes(nodes);
  spec.set_gpus_per_node(1);
  for (std::string& a : command) spec.add_command(std::move(a));
  return spec;
}

rpc::Node NodeNamed(rpc::Coordinator::Stub& stub, const std::string& name) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ListNodesResponse resp;
  EXPECT_TRUE(stub.ListNodes(&c, rpc::ListNodesRequest(), &resp).ok());
  for (const rpc::Node& n : resp.nodes()) {
    if (n.name() == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return rpc::Node();
}

std::string Jobs(const rpc::Node& n) {
  std::string out;
  for (const std::string& j : n.jobs()) absl::StrAppend(&out, out.empty() ? "" : ",", j);
  return out;
}

// ---------------------------------------------------------------- hangs

// Three jobs of one tenant whose own process is stopped hang; before, at
// --hang-timeout 1s, two of them drained the node. Now a timeout below the
// floor is refused, and the hangs (at the floor, 30 s) end the jobs' attempts
// but leave the node UP.
TEST(CoordinatorFindingsTest, TenantsOwnStoppedProcessesDoNotDrainANode) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 3);
  ASSERT_TRUE(cluster.WaitForNodesUp(1)) << cluster.CoordinatorLog();
  const std::string mallory = cluster.CreateToken("mallory");
  rpc::JobSpec spec = Spec({"sh", "-c", "sleep 999 & kill -STOP $!; wait"});
  spec.set_hang_timeout_s(1);
  grpc::Status refused;
  EXPECT_EQ(Submit(cluster, mallory, spec, &refused), "");
  EXPECT_EQ(Code(refused), "INVALID_ARGUMENT");
  EXPECT_EQ(refused.error_message(),
            "hang_timeout_s: 1 s is below the coordinator's floor of 30 s (--hang-timeout-floor-s); ask "
            "for at least that, or 0 for the default");

  spec.set_hang_timeout_s(30);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit(cluster, mallory, spec));
    ASSERT_NE(ids.back(), "");
  }
  LocalCluster::RearmWatchdog();  // the hangs take the 30 s floor
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        for (const std::string& id : ids) {
          if (cluster.GetJob(id).state() != rpc::JOB_FAILED) return false;
        }
        return true;
      },
      std::chrono::seconds(80)))
      << cluster.CoordinatorLog();
  for (const std::string& id : ids) {
    rpc::Job job = cluster.GetJob(id);
    EXPECT_EQ(job.last_hang().attempt(), 1) << id;
    EXPECT_EQ(job.last_hang().node(), "node-a") << id;
    EXPECT_NE(job.last_hang().reason().find("(a process of it is stopped)"), std::string::npos)
        << job.last_hang().reason();
  }
  rpc::Node node = NodeNamed(cluster.stub(), "node-a");
  EXPECT_EQ(rpc::NodeState_Name(node.state()), "NODE_UP");
  EXPECT_EQ(node.reason(), "");
  EXPECT_EQ(cluster.CoordinatorLog().find("auto-drained"), std::string::npos);
}

// ---------------------------------------------------------------- reports, listings, checkpoints

// A coordinator and node-a, node-b (2 GPUs each); tenant alpha runs a
// two-node job (rank 0 on one node, rank 1 on the other) and tenant beta a
// one-node job, both until the suite ends.
class PlacementTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new LocalCluster();
    cluster_->StartCoordinator();
    cluster_->StartAgent("node-a", 2);
    cluster_->StartAgent("node-b", 2);
    ASSERT_TRUE(cluster_->WaitForNodesUp(2)) << cluster_->CoordinatorLog();
    alpha_ = new std::string(cluster_->CreateToken("alpha"));
    beta_ = new std::string(cluster_->CreateToken("beta"));
    rpc::JobSpec a = Spec({"sleep", "600"}, 2);
    a.set_checkpoint_uri("file://" + cluster_->dir() + "/ckpt");
    alpha_job_ = new std::string(Submit(*cluster_, *alpha_, a));
    beta_job_ = new std::string(Submit(*cluster_, *beta_, Spec({"sleep", "600"})));
    ASSERT_TRUE(LocalCluster::WaitFor([] {
      return cluster_->GetJob(*alpha_job_).state() == rpc::JOB_RUNNING &&
             cluster_->GetJob(*beta_job_).state() == rpc::JOB_RUNNING;
    })) << cluster_->CoordinatorLog();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static std::string NodeOf(const std::string& job, int rank) {
    const rpc::Job j = cluster_->GetJob(job);
    for (const rpc::RankPlacement& p : j.allocation()) {
      if (p.rank() == rank) return p.node();
    }
    return "";
  }
  // A channel presenting `node`'s agent certificate.
  static std::shared_ptr<grpc::Channel> AgentChannel(const std::string& node) {
    grpc::ChannelArguments args;
    absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(cluster_->tls_dir(), "agent-" + node);
    EXPECT_TRUE(m.ok()) << m.status();
    return grpc::CreateCustomChannel(cluster_->address(),
                                     security::ClientCredentials(*m, security::kCoordinatorName, "", &args), args);
  }

  static LocalCluster* cluster_;
  static std::string* alpha_;
  static std::string* beta_;
  static std::string* alpha_job_;
  static std::string* beta_job_;
};

LocalCluster* PlacementTest::cluster_ = nullptr;
std::string* PlacementTest::alpha_ = nullptr;
std::string* PlacementTest::beta_ = nullptr;
std::string* PlacementTest::alpha_job_ = nullptr;
std::string* PlacementTest::beta_job_ = nullptr;

// With its own certificate, under its own name, the node of alpha's rank 1
// reports alpha's rank 0 (placed on the other node) exited 0, and a job id
// carrying control characters. Before, the job became SUCCEEDED.
TEST_F(PlacementTest, ReportOfARankPlacedOnAnotherNodeIsIgnoredAndLogged) {
  const std::string node0 = NodeOf(*alpha_job_, 0), node1 = NodeOf(*alpha_job_, 1);
  ASSERT_NE(node0, node1);
  rpc::HeartbeatRequest req;
  req.set_node(node1);
  req.set_health_ok(true);
  for (const std::string& id : {*alpha_job_, std::string("1\n[forged] line")}) {
    rpc::RankReport* r = req.add_ranks();
    r->set_job_id(id);
    r->set_attempt(1);
    r->set_rank(0);
    r->set_phase(rpc::RANK_EXITED);
    r->set_exit_code(0);
  }
  grpc::ClientContext c;
  Deadline(&c);
  rpc::HeartbeatResponse resp;
  grpc::Status s = rpc::NodeAgent::NewStub(AgentChannel(node1))->Heartbeat(&c, req, &resp);
  ASSERT_EQ(Code(s), "OK") << s.error_message();
  const std::string line = absl::StrCat(
      "node '", node1, "' reported 2 rank(s) not placed on it; ignored: job '", *alpha_job_,
      "' attempt 1 rank 0: placed on node ", node0, "; job '1\\n[forged] line' attempt 1 rank 0: no such job");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_->CoordinatorLog().find(line) != std::string::npos; },
                                    std::chrono::seconds(10)))
      << cluster_->CoordinatorLog();
  EXPECT_EQ(cluster_->CoordinatorLog().find("\n[forged] line"), std::string::npos);
  rpc::Job job = cluster_->GetJob(*alpha_job_);
  EXPECT_EQ(rpc::JobState_Name(job.state()), "JOB_RUNNING");
  EXPECT_EQ(job.attempt(), 1);
}

// Before, beta saw alpha's job ids on every node.
TEST_F(PlacementTest, NodeListingShowsAUserOnlyItsOwnJobs) {
  const std::string beta_node = NodeOf(*beta_job_, 0);
  std::unique_ptr<rpc::Coordinator::Stub> beta = cluster_->CoordinatorStubAs(*beta_);
  for (const char* name : {"node-a", "node-b"}) {
    EXPECT_EQ(Jobs(NodeNamed(*beta, name)), name == beta_node ? *beta_job_ : "") << name;
    EXPECT_EQ(NodeNamed(*beta, name).gpus_allocated(), name == beta_node ? 2 : 1) << name;
  }
  std::unique_ptr<rpc::Coordinator::Stub> alpha = cluster_->CoordinatorStubAs(*alpha_);
  EXPECT_EQ(Jobs(NodeNamed(*alpha, beta_node)), *alpha_job_);
  // Admins see every job.
  const rpc::Node as_admin = NodeNamed(cluster_->stub(), beta_node);
  const std::set<std::string> seen(as_admin.jobs().begin(), as_admin.jobs().end());
  EXPECT_EQ(seen, (std::set<std::string>{*alpha_job_, *beta_job_}));
}

// The node of alpha's rank 0 reports rank 1's shard (placed on the other
// node) durable, asking to keep 1 step. Before, it was accepted.
TEST_F(PlacementTest, CheckpointReportForAnotherNodesRankIsRefused) {
  const std::string node0 = NodeOf(*alpha_job_, 0), node1 = NodeOf(*alpha_job_, 1);
  auto stub = rpc::CheckpointCommit::NewStub(AgentChannel(node0));
  rpc::ShardDurableRequest req;
  req.set_node(node0);
  req.set_job_id(*alpha_job_);
  req.set_attempt(1);
  req.set_step(5);
  req.set_rank(1);
  req.set_world_size(2);
  req.set_shard_key(ckpt_layout::ShardKey(*alpha_job_, 5, 1, 2));
  req.set_keep_last(1);
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ShardDurableResponse resp;
  grpc::Status s = stub->ReportShardDurable(&c, req, &resp);
  EXPECT_EQ(Code(s), "PERMISSION_DENIED");
  EXPECT_EQ(s.error_message(), absl::StrCat("rank 1 of job ", *alpha_job_, " is placed on node ", node1,
                                            ", not on '", node0, "'"));
  // Its own rank's report passes the check (and commits nothing: no shard is there).
  req.set_rank(0);
  req.set_shard_key(ckpt_layout::ShardKey(*alpha_job_, 5, 0, 2));
  grpc::ClientContext c2;
  Deadline(&c2);
  s = stub->ReportShardDurable(&c2, req, &resp);
  EXPECT_EQ(Code(s), "OK") << s.error_message();
  EXPECT_FALSE(resp.committed());
  EXPECT_EQ(resp.committed_step(), -1);
}

// ---------------------------------------------------------------- pending jobs

// Before, a tenant could queue pending jobs without end. The default cap is
// 1,000 (--max-pending-per-tenant); the rate limit is lifted so that the
// test reaches it at once.
TEST(CoordinatorFindingsTest, PendingJobsOfATenantAreCapped) {
  LocalCluster cluster({"--submit-rate", "100000", "--submit-burst", "100000"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1)) << cluster.CoordinatorLog();
  const std::string beta = cluster.CreateToken("beta");
  const std::string alpha = cluster.CreateToken("alpha");
  // A running job of beta's holds the only GPU; one-GPU jobs queue behind it.
  const std::string holder = Submit(cluster, beta, Spec({"sleep", "600"}));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(holder).state() == rpc::JOB_RUNNING; }))
      << cluster.CoordinatorLog();
  std::unique_ptr<rpc::Coordinator::Stub> stub = cluster.CoordinatorStubAs(beta);
  const rpc::JobSpec queued = Spec({"true"});
  for (int i = 0; i < 1000; ++i) {
    grpc::ClientContext c;
    Deadline(&c);
    rpc::SubmitJobRequest req;
    *req.mutable_spec() = queued;
    rpc::SubmitJobResponse resp;
    grpc::Status s = stub->SubmitJob(&c, req, &resp);
    ASSERT_EQ(Code(s), "OK") << i << ": " << s.error_message();
  }
  grpc::Status s;
  EXPECT_EQ(Submit(cluster, beta, queued, &s), "");
  EXPECT_EQ(Code(s), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(s.error_message(),
            "tenant 'beta' has 1000 pending jobs, the most it may queue (1000, --max-pending-per-tenant): "
            "wait for some to start, or cancel some");
  // Another tenant, and an admin, are not held to beta's count.
  EXPECT_NE(Submit(cluster, alpha, queued, &s), "") << s.error_message();
  rpc::JobSpec for_beta = queued;
  for_beta.set_tenant("beta");
  EXPECT_NE(Submit(cluster, "", for_beta, &s), "") << s.error_message();
}

}  // namespace
}  // namespace athanor::testing
