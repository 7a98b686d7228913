// Attacks on a secure cluster (docs/security.md): one test per attack, each
// expected to be refused with an exact gRPC status and to leave the
// coordinator's state exactly as it was (jobs, nodes, quotas, tokens, tenant
// policies, compared before and after). The suite ends by printing a table of
// attack, expected result and result.
//
// The cluster: a coordinator and agents node-a and node-b (1 GPU each);
// tenant "alpha" runs a long job (the victim) on one node, tenant "beta" is the
// attacker and has a finished job of its own.
#include <unistd.h>

#include <iomanip>
#include <iostream>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"
#include "security/token.h"
#include "security/tls.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

struct Row {
  std::string attack, expected, result;
};
std::vector<Row>& Table() {
  static std::vector<Row> rows;
  return rows;
}

// Records one attack and checks its result.
void Attack(const std::string& attack, const std::string& expected, const std::string& result) {
  Table().push_back({attack, expected, result});
  EXPECT_EQ(result, expected) << attack;
}

class PrintTable : public ::testing::Environment {
 public:
  void TearDown() override {
    size_t w0 = 6, w1 = 8;
    for (const Row& r : Table()) {
      w0 = std::max(w0, r.attack.size());
      w1 = std::max(w1, r.expected.size());
    }
    std::cout << "\n" << std::left << std::setw(w0 + 2) << "ATTACK" << std::setw(w1 + 2) << "EXPECTED"
              << "RESULT\n";
    for (const Row& r : Table()) {
      std::cout << std::setw(w0 + 2) << r.attack << std::setw(w1 + 2) << r.expected << r.result
                << (r.result == r.expected ? "" : "   <-- NOT REFUSED") << "\n";
    }
  }
};
const auto* const kTable = ::testing::AddGlobalTestEnvironment(new PrintTable);

std::string Code(const grpc::Status& s) {
  return s.ok() ? "OK" : absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()));
}

// The code a refused CLI call printed ("PERMISSION_DENIED"), else its stderr.
std::string Code(const CliResult& r) {
  return r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err;
}

template <typename Message>
std::string Text(const Message& m) {
  return m.DebugString();
}

void Deadline(grpc::ClientContext* c) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

class AttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new LocalCluster();
    cluster_->StartCoordinator();
    cluster_->StartAgent("node-a", 1);
    cluster_->StartAgent("node-b", 1);
    ASSERT_TRUE(cluster_->WaitForNodesUp(2)) << cluster_->CoordinatorLog();
    alpha_ = new std::string(cluster_->CreateToken("alpha"));
    beta_ = new std::string(cluster_->CreateToken("beta"));
    // beta's own job, finished.
    CliResult own = cluster_->CliAs(*beta_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "true"});
    ASSERT_EQ(own.exit_code, 0) << own.err;
    beta_job_ = new std::string(absl::StripAsciiWhitespace(own.out));
    ASSERT_EQ(cluster_->Cli({"wait", *beta_job_, "--timeout", "30"}).exit_code, 0);
    // alpha's job, running until the suite ends.
    CliResult victim = cluster_->CliAs(
        *alpha_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--checkpoint-uri",
                  "file://" + cluster_->dir() + "/ckpt", "--", "sleep", "600"});
    ASSERT_EQ(victim.exit_code, 0) << victim.err;
    victim_ = new std::string(absl::StripAsciiWhitespace(victim.out));
    ASSERT_TRUE(LocalCluster::WaitFor([] { return cluster_->GetJob(*victim_).state() == rpc::JOB_RUNNING; }))
        << cluster_->CoordinatorLog();
    victim_node_ = new std::string(cluster_->GetJob(*victim_).allocation(0).node());
    other_node_ = new std::string(*victim_node_ == "node-a" ? "node-b" : "node-a");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // Everything an attack could change, as the admin sees it.
  static std::string Snapshot() {
    std::string out;
    {
      grpc::ClientContext c;
      Deadline(&c);
      rpc::ListJobsRequest req;
      req.set_all(true);
      rpc::ListJobsResponse resp;
      EXPECT_TRUE(cluster_->stub().ListJobs(&c, req, &resp).ok());
      for (const rpc::Job& j : resp.jobs()) {
        absl::StrAppend(&out, "job ", j.id(), " ", j.spec().tenant(), " ", rpc::JobState_Name(j.state()),
                        " attempt ", j.attempt(), " step ", j.committed_step(), " prio ",
                        j.spec().priority(), "\n");
      }
    }
    {
      grpc::ClientContext c;
      Deadline(&c);
      rpc::ListNodesResponse resp;
      EXPECT_TRUE(cluster_->stub().ListNodes(&c, rpc::ListNodesRequest(), &resp).ok());
      for (const rpc::Node& n : resp.nodes()) {
        absl::StrAppend(&out, "node ", n.name(), " ", rpc::NodeState_Name(n.state()), " ", n.reason(),
                        " ", n.agent_address(), "\n");
      }
    }
    {
      grpc::ClientContext c;
      Deadline(&c);
      rpc::ListQuotasResponse resp;
      EXPECT_TRUE(cluster_->stub().ListQuotas(&c, rpc::ListQuotasRequest(), &resp).ok());
      absl::StrAppend(&out, Text(resp));
    }
    CliResult tokens = cluster_->Cli({"admin", "token", "list", "--json"});
    EXPECT_EQ(tokens.exit_code, 0) << tokens.err;
    CliResult policies = cluster_->Cli({"admin", "tenant", "list", "--json"});
    EXPECT_EQ(policies.exit_code, 0) << policies.err;
    // Billing: prices, plans, and the attacker's balance (the victim's running
    // job may add its first, free accrual at any time; beta's jobs are done).
    CliResult prices = cluster_->Cli({"admin", "price", "list", "--json"});
    EXPECT_EQ(prices.exit_code, 0) << prices.err;
    CliResult plans = cluster_->Cli({"admin", "plan", "list", "--json"});
    EXPECT_EQ(plans.exit_code, 0) << plans.err;
    CliResult balance = cluster_->Cli({"balance", "--tenant", "beta", "--json"});
    EXPECT_EQ(balance.exit_code, 0) << balance.err;
    return out + tokens.out + policies.out + prices.out + plans.out + balance.out;
  }

  void SetUp() override { before_ = Snapshot(); }
  void TearDown() override { EXPECT_EQ(Snapshot(), before_) << "the attack changed the state"; }

  static std::unique_ptr<rpc::Coordinator::Stub> As(const std::string& token) {
    return cluster_->CoordinatorStubAs(token);
  }

  // A Heartbeat to the coordinator from `stub` claiming `node`, reporting the
  // victim's rank 0 exited with code 0.
  static grpc::Status ForgedExit(rpc::NodeAgent::Stub& stub, const std::string& node,
                                 rpc::HeartbeatResponse* resp) {
    rpc::Job victim = cluster_->GetJob(*victim_);
    rpc::HeartbeatRequest req;
    req.set_node(node);
    req.set_known_generation(0);
    req.set_health_ok(true);
    rpc::RankReport* r = req.add_ranks();
    r->set_job_id(victim.id());
    r->set_attempt(victim.attempt());
    r->set_rank(0);
    r->set_phase(rpc::RANK_EXITED);
    r->set_exit_code(0);
    grpc::ClientContext c;
    Deadline(&c);
    return stub.Heartbeat(&c, req, resp);
  }

  static LocalCluster* cluster_;
  static std::string* alpha_;
  static std::string* beta_;
  static std::string* victim_;
  static std::string* beta_job_;
  static std::string* victim_node_;
  static std::string* other_node_;
  std::string before_;
};

LocalCluster* AttackTest::cluster_ = nullptr;
std::string* AttackTest::alpha_ = nullptr;
std::string* AttackTest::beta_ = nullptr;
std::string* AttackTest::victim_ = nullptr;
std::string* AttackTest::beta_job_ = nullptr;
std::string* AttackTest::victim_node_ = nullptr;
std::string* AttackTest::other_node_ = nullptr;

// ---------------------------------------------------------------- authentication

TEST_F(AttackTest, UnauthenticatedRpc) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::CancelJobRequest req;
  req.set_job_id(*victim_);
  rpc::CancelJobResponse resp;
  grpc::Status s = As("")->CancelJob(&c, req, &resp);
  Attack("cancel a job without credentials", "UNAUTHENTICATED", Code(s));
  EXPECT_EQ(s.error_message(), "no credentials: send a bearer token (ATHANOR_TOKEN or --token-file) over TLS");
}

TEST_F(AttackTest, PlaintextToTheTlsPort) {
  CliResult r = cluster_->CliPlaintext({"jobs"});
  Attack("plaintext call to the TLS port", "refused (exit 1)", r.exit_code == 1 ? "refused (exit 1)" : r.out);
}

TEST_F(AttackTest, ForgedToken) {
  std::string forged = beta_->substr(0, 21) + std::string(64, 'f');
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ListJobsResponse resp;
  grpc::Status s = As(forged)->ListJobs(&c, rpc::ListJobsRequest(), &resp);
  Attack("a token with a guessed secret", "UNAUTHENTICATED", Code(s));
  EXPECT_EQ(s.error_message(), absl::StrCat("token ", beta_->substr(4, 16), " is not known"));
}

TEST_F(AttackTest, ExpiredToken) {
  std::string token = cluster_->CreateToken("alpha", "user", "1s");
  before_ = Snapshot();  // the new token is not the attack
  std::unique_ptr<rpc::Coordinator::Stub> stub = As(token);
  grpc::Status s;
  // The token lives one second; poll until the coordinator's clock passes it.
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    grpc::ClientContext c;
    Deadline(&c);
    rpc::ListJobsResponse resp;
    s = stub->ListJobs(&c, rpc::ListJobsRequest(), &resp);
    return !s.ok();
  }, std::chrono::seconds(5)));
  Attack("an expired token", "UNAUTHENTICATED", Code(s));
  EXPECT_NE(s.error_message().find(" expired at unix time "), std::string::npos) << s.error_message();
}

TEST_F(AttackTest, RevokedToken) {
  std::string token = cluster_->CreateToken("alpha");
  std::string id = token.substr(4, 16);
  ASSERT_EQ(cluster_->Cli({"admin", "token", "revoke", id}).exit_code, 0);
  before_ = Snapshot();
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ListJobsResponse resp;
  grpc::Status s = As(token)->ListJobs(&c, rpc::ListJobsRequest(), &resp);
  Attack("a revoked token", "UNAUTHENTICATED", Code(s));
  EXPECT_EQ(s.error_message(), "token " + id + " was revoked");
}

// ---------------------------------------------------------------- another tenant's jobs

TEST_F(AttackTest, CancelAnotherTenantsJob) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::CancelJobRequest req;
  req.set_job_id(*victim_);
  rpc::CancelJobResponse resp;
  grpc::Status s = As(*beta_)->CancelJob(&c, req, &resp);
  Attack("beta cancels alpha's job", "PERMISSION_DENIED", Code(s));
  EXPECT_EQ(s.error_message(), absl::StrCat("Coordinator.CancelJob: tenant 'alpha' is not the caller's (user beta (token ",
                                            beta_->substr(4, 16), "))"));
}

TEST_F(AttackTest, PreemptAnotherTenantsJob) {
  CliResult r = cluster_->CliAs(*beta_, {"preempt", *victim_});
  Attack("beta preempts alpha's job", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
}

TEST_F(AttackTest, WaitForAnotherTenantsJob) {
  CliResult r = cluster_->CliAs(*beta_, {"wait", *victim_, "--timeout", "5"});
  Attack("beta waits for alpha's job", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(AttackTest, ReadAnotherTenantsLogs) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::GetLogsRequest req;
  req.set_job_id(*victim_);
  req.set_rank(-1);
  rpc::GetLogsResponse resp;
  grpc::Status s = As(*beta_)->GetLogs(&c, req, &resp);
  Attack("beta reads alpha's logs", "PERMISSION_DENIED", Code(s));
  EXPECT_EQ(resp.logs_size(), 0);
}

TEST_F(AttackTest, ListAnotherTenantsCheckpoints) {
  CliResult r = cluster_->CliAs(*beta_, {"checkpoints", *victim_});
  Attack("beta lists alpha's checkpoints", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
}

TEST_F(AttackTest, ListAllJobsSeesOnlyOwn) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ListJobsRequest req;
  req.set_all(true);
  rpc::ListJobsResponse resp;
  ASSERT_TRUE(As(*beta_)->ListJobs(&c, req, &resp).ok());
  std::string seen;
  for (const rpc::Job& j : resp.jobs()) absl::StrAppend(&seen, seen.empty() ? "" : ",", j.id());
  Attack("beta lists all jobs", "only beta's: " + *beta_job_, "only beta's: " + seen);
  grpc::ClientContext c2;
  Deadline(&c2);
  req.set_tenant("alpha");
  grpc::Status s = As(*beta_)->ListJobs(&c2, req, &resp);
  Attack("beta lists alpha's jobs by name", "PERMISSION_DENIED", Code(s));
}

TEST_F(AttackTest, OtherTenantsUsage) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::UsageRequest req;
  req.set_tenant("alpha");
  rpc::UsageResponse resp;
  grpc::Status s = As(*beta_)->Usage(&c, req, &resp);
  Attack("beta reads alpha's usage", "PERMISSION_DENIED", Code(s));
}

TEST_F(AttackTest, ReadAnotherTenantsBill) {
  CliResult r = cluster_->CliAs(*beta_, {"bill", "--tenant", "alpha"});
  Attack("beta reads alpha's bill", "PERMISSION_DENIED", Code(r));
  EXPECT_NE(r.err.find(absl::StrCat("Billing.GetBill: tenant 'alpha' is not the caller's (user beta (token ",
                                    beta_->substr(4, 16), "))")),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(AttackTest, OtherTenantsBalances) {
  CliResult r = cluster_->CliAs(*beta_, {"balance", "--tenant", "alpha"});
  Attack("beta reads alpha's balance", "PERMISSION_DENIED", Code(r));
  CliResult all = cluster_->CliAs(*beta_, {"balance", "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  Attack("beta lists every balance", "no alpha",
         all.out.find("\"alpha\"") == std::string::npos ? "no alpha" : all.out);
}

// ---------------------------------------------------------------- admin verbs

TEST_F(AttackTest, UserDrainsANode) {
  CliResult r = cluster_->CliAs(*beta_, {"drain", *victim_node_});
  Attack("a user drains a node", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
  EXPECT_NE(r.err.find("Coordinator.DrainNode is for admins only"), std::string::npos) << r.err;
}

TEST_F(AttackTest, UserSetsAQuota) {
  CliResult r = cluster_->CliAs(*beta_, {"quota", "set", "beta", "100"});
  Attack("a user sets a quota", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
}

TEST_F(AttackTest, UserAddsCredit) {
  CliResult r = cluster_->CliAs(*beta_, {"admin", "credit", "add", "beta", "1000000"});
  Attack("a user adds credit to its tenant", "PERMISSION_DENIED", Code(r));
  EXPECT_NE(r.err.find("Billing.AddCredit is for admins only"), std::string::npos) << r.err;
}

TEST_F(AttackTest, UserSetsAPrice) {
  CliResult r = cluster_->CliAs(*beta_, {"admin", "price", "set", "*", "--per-hour", "0"});
  Attack("a user sets a price", "PERMISSION_DENIED", Code(r));
}

TEST_F(AttackTest, UserRaisesItsCreditLimit) {
  CliResult r = cluster_->CliAs(*beta_, {"admin", "plan", "set", "beta", "--credit-limit", "1000000"});
  Attack("a user raises its credit limit", "PERMISSION_DENIED", Code(r));
}

TEST_F(AttackTest, UserCreatesAToken) {
  CliResult r = cluster_->CliAs(*beta_, {"admin", "token", "create", "--tenant", "beta", "--role", "admin"});
  Attack("a user creates an admin token", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
  EXPECT_EQ(r.out, "");
}

TEST_F(AttackTest, UserRaisesItsPriorityCap) {
  CliResult r = cluster_->CliAs(*beta_, {"admin", "tenant", "set", "beta", "--max-priority", "100"});
  Attack("a user raises its priority cap", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
}

// ---------------------------------------------------------------- submissions

TEST_F(AttackTest, PriorityAboveTheCap) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::SubmitJobRequest req;
  req.mutable_spec()->set_nodes(1);
  req.mutable_spec()->set_gpus_per_node(1);
  req.mutable_spec()->add_command("true");
  req.mutable_spec()->set_priority(50);
  rpc::SubmitJobResponse resp;
  grpc::Status s = As(*beta_)->SubmitJob(&c, req, &resp);
  Attack("submit above the tenant's priority cap", "PERMISSION_DENIED", Code(s));
  EXPECT_EQ(s.error_message(), "priority: 50 is above tenant 'beta''s maximum 0 (an admin sets it: athanor admin tenant set)");
}

TEST_F(AttackTest, SubmitAsAnotherTenant) {
  CliResult r = cluster_->CliAs(*beta_, {"submit", "--tenant", "alpha", "--nodes", "1", "--gpus-per-node",
                                         "1", "--", "true"});
  Attack("submit naming another tenant", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
  EXPECT_NE(r.err.find("tenant: 'alpha' is not the caller's tenant 'beta'"), std::string::npos) << r.err;
}

TEST_F(AttackTest, UriCarryingCredentials) {
  CliResult r = cluster_->CliAs(*beta_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--checkpoint-uri",
                                         "s3://bucket/p?access_key=AKIA&secret_key=hunter2", "--", "true"});
  Attack("a checkpoint URI carrying credentials", "INVALID_ARGUMENT",
         r.err.find("(INVALID_ARGUMENT") != std::string::npos ? "INVALID_ARGUMENT" : r.err);
  EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
}

TEST_F(AttackTest, EndpointOffTheAllowList) {
  CliResult r = cluster_->CliAs(*beta_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--checkpoint-uri",
                                         "s3://bucket/p?endpoint=http://169.254.169.254", "--", "true"});
  Attack("a store endpoint off the allow-list", "PERMISSION_DENIED",
         r.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : r.err);
}

// ---------------------------------------------------------------- agents

TEST_F(AttackTest, AgentWithoutCertificate) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::RegisterNodeRequest req;
  req.set_name(*victim_node_);
  req.set_agent_address("127.0.0.1:1");
  req.mutable_inventory()->set_gpus(8);
  rpc::RegisterNodeResponse resp;
  grpc::Status s = cluster_->AgentStub("")->RegisterNode(&c, req, &resp);
  Attack("register a node without a certificate", "UNAUTHENTICATED", Code(s));
}

TEST_F(AttackTest, UserTokenAsAnAgent) {
  // A tenant's token is no agent identity: its heartbeat would receive the node's ranks and env.
  std::unique_ptr<rpc::NodeAgent::Stub> stub =
      rpc::NodeAgent::NewStub([&] {
        grpc::ChannelArguments args;
        absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(cluster_->tls_dir(), "");
        EXPECT_TRUE(m.ok());
        return grpc::CreateCustomChannel(
            cluster_->address(), security::ClientCredentials(*m, security::kCoordinatorName, *beta_, &args), args);
      }());
  rpc::HeartbeatResponse resp;
  grpc::Status s = ForgedExit(*stub, *victim_node_, &resp);
  Attack("a user's heartbeat for a node", "PERMISSION_DENIED", Code(s));
  EXPECT_EQ(resp.desired_size(), 0);
}

TEST_F(AttackTest, NodeTakeover) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::RegisterNodeRequest req;
  req.set_name(*victim_node_);
  req.set_agent_address("127.0.0.1:1");
  req.mutable_inventory()->set_gpus(8);
  rpc::RegisterNodeResponse resp;
  grpc::Status s = cluster_->AgentStub(*other_node_)->RegisterNode(&c, req, &resp);
  Attack("one node's certificate registers as another", "PERMISSION_DENIED", Code(s));
}

TEST_F(AttackTest, ForgedExitReport) {
  rpc::HeartbeatResponse resp;
  grpc::Status s = ForgedExit(*cluster_->AgentStub(*other_node_), *victim_node_, &resp);
  Attack("a forged heartbeat reporting another node's rank exited", "PERMISSION_DENIED", Code(s));
  EXPECT_EQ(resp.desired_size(), 0);
}

TEST_F(AttackTest, ForgedCheckpointReport) {
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ReportCheckpointRequest req;
  req.set_job_id(*victim_);
  req.set_step(1000000);
  rpc::ReportCheckpointResponse resp;
  grpc::Status s = cluster_->AgentStub(*other_node_)->ReportCheckpoint(&c, req, &resp);
  Attack("a checkpoint report for a job not on the node", "PERMISSION_DENIED", Code(s));
}

TEST_F(AttackTest, ReadLogsStraightFromAnAgent) {
  // The agents' AgentControl answers the coordinator's certificate only.
  rpc::Node target;
  {
    grpc::ClientContext c;
    Deadline(&c);
    rpc::ListNodesResponse nodes;
    ASSERT_TRUE(cluster_->stub().ListNodes(&c, rpc::ListNodesRequest(), &nodes).ok());
    for (const rpc::Node& n : nodes.nodes()) {
      if (n.name() == *victim_node_) target = n;
    }
  }
  grpc::ChannelArguments args;
  absl::StatusOr<security::TlsMaterial> m =
      security::LoadTlsMaterial(cluster_->tls_dir(), "agent-" + *other_node_);
  ASSERT_TRUE(m.ok()) << m.status();
  auto stub = rpc::AgentControl::NewStub(grpc::CreateCustomChannel(
      target.agent_address(), security::ClientCredentials(*m, security::AgentName(*victim_node_), "", &args),
      args));
  grpc::ClientContext c;
  Deadline(&c);
  rpc::ReadLogRequest req;
  req.set_job_id(*victim_);
  req.set_attempt(1);
  rpc::ReadLogResponse resp;
  grpc::Status s = stub->ReadLog(&c, req, &resp);
  Attack("another agent's certificate reads a node's logs", "PERMISSION_DENIED", Code(s));
  // Without any certificate the TLS handshake itself fails.
  auto bare = rpc::AgentControl::NewStub(grpc::CreateChannel(target.agent_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext c2;
  Deadline(&c2);
  Attack("plaintext read of a node's logs", "UNAVAILABLE", Code(bare->ReadLog(&c2, req, &resp)));
}

// ---------------------------------------------------------------- secrets

TEST_F(AttackTest, TokensNeverInRepliesOrLogs) {
  // Every reply a user or admin gets about jobs and tokens, and every log.
  std::string replies;
  for (const std::string* token : {alpha_, beta_}) {
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"jobs", "--all", "--json"}, {"job", *victim_, "--json"},
                                               {"nodes", "--json"}, {"usage", "--json"}}) {
      replies += cluster_->CliAs(*token, args).out;
    }
  }
  replies += cluster_->Cli({"admin", "token", "list", "--json"}).out;
  replies += cluster_->Cli({"job", *victim_, "--json"}).out;
  std::string logs = ReadFile(cluster_->dir() + "/coordinator.log") + ReadFile(cluster_->dir() + "/agent-node-a.log") +
                     ReadFile(cluster_->dir() + "/agent-node-b.log");
  std::string secret = alpha_->substr(21);
  std::string found = replies.find(secret) != std::string::npos ? "in a reply"
                      : logs.find(secret) != std::string::npos  ? "in a log"
                                                                 : "absent";
  Attack("alpha's token in replies and logs", "absent", found);
  EXPECT_NE(replies.find(alpha_->substr(4, 16)), std::string::npos) << "the token id should be listed";
}

TEST_F(AttackTest, TenantStoreSecretStaysSecret) {
  // An admin sets alpha's store credentials from a 0600 file.
  const std::string secret = "alpha-store-secret-" + std::to_string(getpid());
  const std::string file = cluster_->dir() + "/alpha.credentials";
  ASSERT_TRUE(security::WritePrivateFile(file, "access_key=AKIAALPHA\nsecret_key=" + secret + "\n").ok());
  CliResult set = cluster_->Cli({"admin", "credentials", "set", "alpha", "--file", file});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "alpha\n");
  CliResult by_user = cluster_->CliAs(*beta_, {"admin", "credentials", "set", "beta", "--file", file});
  Attack("a user sets store credentials", "PERMISSION_DENIED",
         by_user.err.find("(PERMISSION_DENIED") != std::string::npos ? "PERMISSION_DENIED" : by_user.err);
  // alpha's rank gets them (it prints their SHA-256, not them); beta's does not.
  auto run = [&](const std::string& token, const std::string& script) {
    CliResult r = cluster_->CliAs(token, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id(absl::StripAsciiWhitespace(r.out));
    EXPECT_EQ(cluster_->Cli({"wait", id, "--timeout", "30"}).exit_code, 0);
    return std::make_pair(id, cluster_->CliAs(token, {"logs", id}).out);
  };
  auto [alpha_job, alpha_log] = run(*alpha_, "printf %s \"$AWS_SECRET_ACCESS_KEY\" | sha256sum | cut -c1-64");
  Attack("alpha's rank gets alpha's store secret", "its SHA-256",
         alpha_log == "[rank 0] " + security::HashSecret("", secret) + "\n" ? "its SHA-256" : alpha_log);
  auto [beta_job, beta_log] = run(*beta_, "echo ${AWS_SECRET_ACCESS_KEY:-none}");
  Attack("beta's rank gets alpha's store secret", "none", beta_log == "[rank 0] none\n" ? "none" : beta_log);
  before_ = Snapshot();  // the jobs above are not the attack
  // Nowhere else: no reply (job record, job --json, listings), no log, not
  // in the state database's bytes (sealed at rest).
  std::string replies = cluster_->Cli({"job", alpha_job, "--json"}).out + cluster_->CliAs(*alpha_, {"job", alpha_job, "--json"}).out +
                        cluster_->Cli({"jobs", "--all", "--json"}).out + cluster_->Cli({"admin", "credentials", "list"}).out +
                        cluster_->Cli({"nodes", "--json"}).out + cluster_->Cli({"usage", "--json"}).out;
  rpc::Job record = cluster_->GetJob(alpha_job);
  replies += record.DebugString();
  std::string logs = ReadFile(cluster_->dir() + "/coordinator.log") + ReadFile(cluster_->dir() + "/agent-node-a.log") +
                     ReadFile(cluster_->dir() + "/agent-node-b.log");
  std::string db = ReadFile(cluster_->credentials_db()) + ReadFile(cluster_->credentials_db() + "-wal");
  Attack("alpha's store secret in RPC replies", "absent", replies.find(secret) == std::string::npos ? "absent" : "present");
  Attack("alpha's store secret in daemon logs", "absent", logs.find(secret) == std::string::npos ? "absent" : "present");
  Attack("alpha's store secret in the state database", "absent", db.find(secret) == std::string::npos ? "absent" : "present");
  EXPECT_NE(db.find("tenant_secrets"), std::string::npos);
}

}  // namespace
}  // namespace athanor::testing
