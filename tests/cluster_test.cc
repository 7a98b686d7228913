// End-to-end tests of the walking skeleton: a real coordinator, two agents
// (--gpus 2 each) and the `athanor` CLI on loopback.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// "[rank R] K=V" lines of `athanor logs` into rank -> env.
std::map<int, std::map<std::string, std::string>> ParseEnvLogs(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> env;
  std::regex line_re(R"(^\[rank (\d+)\] ([A-Za-z_][A-Za-z0-9_]*)=(.*)$)");
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::smatch m;
    std::string l(line);
    if (std::regex_match(l, m, line_re)) env[std::stoi(m[1])][m[2]] = m[3];
  }
  return env;
}

class ClusterTest : public ::testing::Test {
 protected:
  void StartCluster() {
    cluster_.StartCoordinator();
    // Two hosts so MASTER_ADDR shows which node holds rank 0.
    cluster_.StartAgent("node-a", 2, "127.0.0.2");
    cluster_.StartAgent("node-b", 2, "127.0.0.1");
    ASSERT_TRUE(cluster_.WaitForNodesUp(2)) << cluster_.CoordinatorLog();
  }
  std::string Submit(const std::vector<std::string>& args) {
    CliResult r = cluster_.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out.substr(0, r.out.find('\n'));
    EXPECT_FALSE(id.empty());
    return id;
  }
  LocalCluster cluster_;
};

TEST_F(ClusterTest, TwoNodeJobSeesEnvContractAndSucceeds) {
  StartCluster();
  std::string id = Submit({"submit", "--name", "env", "--nodes", "2", "--gpus-per-node", "2",
                           "--env", "EXTRA=yes", "--", "env"});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err << cluster_.CoordinatorLog();
  EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n");
  rpc::Job job = cluster_.GetJob(id);
  EXPECT_EQ(job.state(), rpc::JOB_SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1);
  ASSERT_EQ(job.ranks_size(), 4);
  for (const rpc::RankExit& r : job.ranks()) {
    EXPECT_TRUE(r.exited());
    EXPECT_EQ(r.exit_code(), 0);
  }
  CliResult logs = cluster_.Cli({"logs", id});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  auto env = ParseEnvLogs(logs.out);
  ASSERT_EQ(env.size(), 4u) << logs.out;
  // Rank 0's node (whichever the scheduler picked) hosts MASTER_ADDR.
  ASSERT_EQ(job.allocation_size(), 4);
  const std::string master = job.allocation(0).node() == "node-a" ? "127.0.0.2" : "127.0.0.1";
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(env[r]["RANK"], std::to_string(r));
    EXPECT_EQ(env[r]["WORLD_SIZE"], "4");
    EXPECT_EQ(env[r]["LOCAL_RANK"], std::to_string(r % 2));
    EXPECT_EQ(env[r]["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env[r]["NODE_RANK"], std::to_string(r / 2));
    EXPECT_EQ(env[r]["MASTER_ADDR"], master);
    EXPECT_EQ(env[r]["MASTER_PORT"], std::to_string(job.master_port()));
    EXPECT_EQ(env[r]["CUDA_VISIBLE_DEVICES"], std::to_string(r % 2));
    EXPECT_EQ(env[r]["ATHANOR_JOB_ID"], id);
    EXPECT_EQ(env[r]["ATHANOR_ATTEMPT"], "1");
    EXPECT_EQ(env[r]["ATHANOR_COORDINATOR"], cluster_.address());
    EXPECT_EQ(env[r]["EXTRA"], "yes");
  }
  EXPECT_GE(job.master_port(), 29500);
  EXPECT_LE(job.master_port(), 29999);
  CliResult one = cluster_.Cli({"logs", id, "--rank", "3"});
  EXPECT_EQ(ParseEnvLogs(one.out).size(), 1u);
  EXPECT_EQ(ParseEnvLogs(one.out)[3]["RANK"], "3");
  CliResult jobs = cluster_.Cli({"jobs", "--all"});
  EXPECT_NE(jobs.out.find("SUCCEEDED"), std::string::npos) << jobs.out;
  CliResult nodes = cluster_.Cli({"nodes"});
  EXPECT_EQ(nodes.out.rfind("NAME", 0), 0u) << nodes.out;
  EXPECT_NE(nodes.out.find("node-a"), std::string::npos);
}

TEST_F(ClusterTest, FailingRankFailsJobAndStopsTheOthers) {
  cluster_.DisableSandbox();  // checks host pids that ranks print (tests/sandbox does it sandboxed)
  StartCluster();
  std::string id = Submit({"submit", "--nodes", "2", "--gpus-per-node", "2", "--", "sh", "-c",
                           "echo pid=$$; if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 300"});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 3) << wait.out << wait.err;
  rpc::Job job = cluster_.GetJob(id);
  ASSERT_EQ(job.allocation_size(), 4);
  EXPECT_EQ(wait.out, "job " + id + " FAILED: rank 1 on node " + job.allocation(1).node() +
                          " exited with code 3\n");
  ASSERT_EQ(job.ranks_size(), 4);
  EXPECT_TRUE(job.ranks(1).exited());
  EXPECT_EQ(job.ranks(1).exit_code(), 3);
  CliResult show = cluster_.Cli({"job", id});
  EXPECT_NE(show.out.find("EXITED  3\n"), std::string::npos) << show.out;
  // Every rank that started is gone (the agents reaped them before FAILED).
  CliResult logs = cluster_.Cli({"logs", id});
  std::regex pid_re(R"(\[rank (\d+)\] pid=(\d+))");
  int checked = 0;
  for (std::sregex_iterator it(logs.out.begin(), logs.out.end(), pid_re), end; it != end; ++it) {
    pid_t pid = std::stoi((*it)[2]);
    EXPECT_EQ(kill(pid, 0), -1) << "rank " << (*it)[1] << " pid " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH);
    ++checked;
  }
  EXPECT_GE(checked, 1) << logs.out;
  for (int r : {0, 2, 3}) {
    if (job.ranks(r).started()) {
      EXPECT_EQ(job.ranks(r).exit_code(), 128 + SIGTERM) << "rank " << r;
    }
  }
  // The allocation was released with the FAILED transition.
  grpc::ClientContext ctx;
  rpc::ListNodesResponse nodes;
  ASSERT_TRUE(cluster_.stub().ListNodes(&ctx, rpc::ListNodesRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 2);
  for (const rpc::Node& n : nodes.nodes()) {
    EXPECT_EQ(n.gpus_allocated(), 0) << n.name();
    EXPECT_EQ(n.jobs_size(), 0) << n.name();
  }
}

TEST_F(ClusterTest, JobThatCanNeverFitIsRefused) {
  StartCluster();
  CliResult r = cluster_.Cli({"submit", "--nodes", "1", "--gpus-per-node", "3", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "athanor submit: job can never fit: it needs 1 node with 3 free GPUs; only 0 node(s) in "
            "the inventory qualify (INVALID_ARGUMENT, coordinator " +
                cluster_.address() + ")\n");
  r = cluster_.Cli({"submit", "--nodes", "3", "--gpus-per-node", "1", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("job can never fit: it needs 3 nodes with 1 free GPU each; only 2 node(s) "
                       "in the inventory qualify"),
            std::string::npos)
      << r.err;
}

grpc::Status SubmitRaw(LocalCluster& c, const rpc::JobSpec& spec) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  rpc::SubmitJobResponse resp;
  return c.stub().SubmitJob(&ctx, req, &resp);
}

TEST_F(ClusterTest, HostileRequestsAreRefusedAndServiceContinues) {
  StartCluster();
  rpc::JobSpec good;
  good.set_nodes(1);
  good.set_gpus_per_node(1);
  good.add_command("true");
  struct Case {
    std::string what;
    std::function<void(rpc::JobSpec*)> mutate;
    std::string message;
  };
  std::vector<Case> cases = {
      {"empty command", [](rpc::JobSpec* s) { s->clear_command(); }, "spec.command: must not be empty"},
      {"negative nodes", [](rpc::JobSpec* s) { s->set_nodes(-5); }, "spec.nodes: must be >= 1, got -5"},
      {"zero gpus", [](rpc::JobSpec* s) { s->set_gpus_per_node(0); },
       "spec.gpus_per_node: must be >= 1, got 0"},
      {"negative restarts", [](rpc::JobSpec* s) { s->set_max_restarts(-1); },
       "spec.max_restarts: must be >= 0, got -1"},
      {"huge name", [](rpc::JobSpec* s) { s->set_name(std::string(5000, 'n')); },
       "spec.name: is 5000 bytes; at most 4096 allowed"},
      {"huge tenant", [](rpc::JobSpec* s) { s->set_tenant(std::string(1 << 20, 't')); },
       "spec.tenant: is 1048576 bytes; at most 4096 allowed"},
      {"huge env", [](rpc::JobSpec* s) { (*s->mutable_env())["BIG"] = std::string(70000, 'e'); },
       "spec.command/spec.env: total 70010 bytes; at most 65536 allowed"},
      {"huge command", [](rpc::JobSpec* s) { s->add_command(std::string(2 << 20, 'c')); },
       "spec.command/spec.env: total 2097158 bytes; at most 65536 allowed"},
  };
  for (const Case& c : cases) {
    rpc::JobSpec spec = good;
    c.mutate(&spec);
    grpc::Status s = SubmitRaw(cluster_, spec);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_EQ(s.error_message(), c.message) << c.what;
  }
  {
    grpc::ClientContext ctx;
    rpc::GetJobRequest req;
    req.set_job_id(std::string(10000, '9'));
    rpc::Job job;
    EXPECT_EQ(cluster_.stub().GetJob(&ctx, req, &job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    rpc::GetLogsRequest req;
    req.set_job_id("../../etc");
    rpc::GetLogsResponse resp;
    grpc::Status s = cluster_.stub().GetLogs(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "job_id: may hold only printable ASCII without spaces or '/'");
  }
  {
    grpc::ClientContext ctx;
    rpc::RegisterNodeRequest req;
    req.set_name("bad");
    req.mutable_inventory()->set_gpus(-4);
    rpc::RegisterNodeResponse resp;
    grpc::Status s = cluster_.AgentStub("bad")->RegisterNode(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), "inventory.gpus: must be in 0..1024, got -4");
  }
  {
    grpc::ClientContext ctx;
    rpc::HeartbeatRequest req;
    req.set_node("never-registered");
    req.set_max_wait_ms(100000000);
    rpc::HeartbeatResponse resp;
    ASSERT_TRUE(cluster_.AgentStub("never-registered")->Heartbeat(&ctx, req, &resp).ok());
    EXPECT_TRUE(resp.reregister());
  }
  CliResult cancel = cluster_.Cli({"cancel", "12345"});
  EXPECT_EQ(cancel.exit_code, 1);
  EXPECT_NE(cancel.err.find("no job '12345' (NOT_FOUND"), std::string::npos) << cancel.err;
  // Still serving: a valid job runs to completion.
  std::string id = Submit({"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "true"});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  EXPECT_EQ(id, "1");  // refused submissions created no jobs
}

TEST_F(ClusterTest, CoordinatorKill9KeepsJobsNodesAndRunningAttempt) {
  StartCluster();
  std::string done = Submit({"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "true"});
  CliResult waited = cluster_.Cli({"wait", done, "--timeout", "30"});
  ASSERT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  std::string go = cluster_.dir() + "/go";
  std::string id = Submit({"submit", "--name", "survivor", "--nodes", "2", "--gpus-per-node", "2",
                           "--", "sh", "-c",
                           "while [ ! -e " + go + " ]; do sleep 0.05; done; echo finished"});
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(id).state() == rpc::JOB_RUNNING; }))
      << cluster_.CoordinatorLog();

  cluster_.KillCoordinator();
  cluster_.StartCoordinator();
  rpc::Job before = cluster_.GetJob(id);
  EXPECT_EQ(before.spec().name(), "survivor");
  EXPECT_EQ(before.attempt(), 1);
  EXPECT_EQ(cluster_.GetJob(done).state(), rpc::JOB_SUCCEEDED);
  CliResult nodes = cluster_.Cli({"nodes"});
  EXPECT_NE(nodes.out.find("node-a"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("node-b"), std::string::npos) << nodes.out;
  ASSERT_TRUE(cluster_.WaitForNodesUp(2)) << cluster_.CoordinatorLog();
  EXPECT_EQ(cluster_.GetJob(id).state(), rpc::JOB_RUNNING);

  int fd = creat(go.c_str(), 0644);
  ASSERT_GE(fd, 0);
  close(fd);
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err << cluster_.CoordinatorLog();
  rpc::Job job = cluster_.GetJob(id);
  EXPECT_EQ(job.state(), rpc::JOB_SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 0);
  CliResult logs = cluster_.Cli({"logs", id});
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(logs.out.find(absl::StrCat("[rank ", r, "] finished")), std::string::npos) << logs.out;
  }
}

TEST(ClusterTimeoutTest, SilentNodeGoesDownAndFailsItsAttempt) {
  LocalCluster cluster({"--heartbeat-timeout-s", "3"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 2);
  cluster.StartAgent("node-b", 2);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  CliResult sub = cluster.Cli({"submit", "--nodes", "2", "--gpus-per-node", "1", "--", "sleep", "300"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::string id = sub.out.substr(0, sub.out.find('\n'));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).state() == rpc::JOB_RUNNING; }));
  cluster.KillAgent("node-b");
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 3) << wait.out << wait.err;
  EXPECT_NE(wait.out.find("FAILED: node node-b went DOWN (no heartbeat for"), std::string::npos)
      << wait.out;
  CliResult nodes = cluster.Cli({"nodes"});
  EXPECT_NE(nodes.out.find("DOWN"), std::string::npos) << nodes.out;
  CliResult finished = cluster.Cli({"wait", id, "--timeout", "0.2"});
  EXPECT_EQ(finished.exit_code, 3);  // already over: not a timeout
  // `wait` on a running job times out with its own exit code.
  CliResult sub2 = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "2", "--", "sleep", "300"});
  ASSERT_EQ(sub2.exit_code, 0) << sub2.err;
  std::string id2 = sub2.out.substr(0, sub2.out.find('\n'));
  CliResult timeout = cluster.Cli({"wait", id2, "--timeout", "0.3"});
  EXPECT_EQ(timeout.exit_code, 124);
  EXPECT_NE(timeout.err.find("athanor wait: timed out after 0.3 s; job " + id2 + " is "),
            std::string::npos) << timeout.err;
  CliResult cancel = cluster.Cli({"cancel", id2});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  CliResult cancelled = cluster.Cli({"wait", id2, "--timeout", "30"});
  EXPECT_EQ(cancelled.exit_code, 3);
  EXPECT_EQ(cancelled.out, "job " + id2 + " CANCELLED: cancelled by user\n");
}

// Whether `pid` has ended (gone, or a zombie nobody reaps yet).
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.substr(paren + 2, 1) == "Z";
}

TEST(ClusterAgentRestartTest, RestartedAgentKillsOrphanedRanks) {
  LocalCluster cluster;
  cluster.DisableSandbox();  // checks the host pid a rank writes (tests/sandbox does it sandboxed)
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1)) << cluster.CoordinatorLog();
  std::string pid_file = cluster.dir() + "/rank.pid";
  CliResult sub = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "sh", "-c",
                               "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " +
                                   pid_file + " && exec sleep 600"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  std::string id = sub.out.substr(0, sub.out.find('\n'));
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    return cluster.GetJob(id).state() == rpc::JOB_RUNNING && !ReadFile(pid_file).empty();
  })) << cluster.CoordinatorLog();
  pid_t pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &pid));
  ASSERT_GT(pid, 1);

  cluster.KillAgent("node-a");
  EXPECT_FALSE(ProcessGone(pid)) << "the rank should outlive a SIGKILLed agent";
  cluster.StartAgent("node-a", 1);
  bool gone = LocalCluster::WaitFor([&] { return ProcessGone(pid); });
  if (!gone) kill(pid, SIGKILL);
  EXPECT_TRUE(gone) << "orphaned rank " << pid << " still runs";
  // The agent logs once the orphan is gone, so the line may trail the exit.
  const std::string line = absl::StrCat("killed orphaned rank job ", id, " attempt 1 rank 0 (pid ",
                                        pid, ") left by a previous agent");
  std::string agent_log;
  EXPECT_TRUE(LocalCluster::WaitFor([&] {
    agent_log = ReadFile(cluster.dir() + "/agent-node-a.log");
    return agent_log.find(line) != std::string::npos;
  })) << agent_log;
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.exit_code, 3) << wait.out << wait.err;
  EXPECT_EQ(cluster.GetJob(id).state(), rpc::JOB_FAILED) << wait.out;
  EXPECT_NE(wait.out.find("rank 0 on node node-a was lost (its agent restarted)"), std::string::npos)
      << wait.out;
  EXPECT_TRUE(std::filesystem::is_empty(cluster.dir() + "/node-a/run"));
}

TEST(ClusterPaceTest, AgentsFollowTheIntervalTheCoordinatorStretches) {
  // 2 nodes at most 1 heartbeat a second: every agent heartbeats every 2 s,
  // and the 1.5 s DOWN timeout (at the harness's 0.5 s interval) stretches
  // to 6 s. Unstretched, both nodes would go DOWN between heartbeats.
  LocalCluster cluster({"--max-heartbeats-per-s", "1", "--heartbeat-timeout-s", "1.5"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  for (const std::string node : {"node-a", "node-b"}) {
    const std::string log = cluster.dir() + "/agent-" + node + ".log";
    EXPECT_TRUE(LocalCluster::WaitFor([&] {
      return ReadFile(log).find("heartbeat interval now 2000 ms (the coordinator's pace)") !=
             std::string::npos;
    })) << ReadFile(log);
  }
  // A 2-node job that runs 5 s, longer than two intervals: it succeeds only
  // if neither node went DOWN meanwhile.
  CliResult sub = cluster.Cli({"submit", "--nodes", "2", "--gpus-per-node", "1", "--", "sleep", "5"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "60"});
  EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << wait.err << cluster.CoordinatorLog();
  CliResult nodes = cluster.Cli({"nodes"});
  EXPECT_EQ(nodes.out.find("DOWN"), std::string::npos) << nodes.out;
}

}  // namespace
}  // namespace athanor::testing
