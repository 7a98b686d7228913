// Integration tests of scheduling through the real coordinator, two agents
// (2 GPU slots each) and the `athanor` CLI: priority preemption, drain,
// manual preemption, `why`, quotas and GPU-second accounting.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// A rank that "checkpoints" on SIGTERM (prints and exits 0), else idles;
// from attempt `done_attempt` on it exits 0 at once.
std::vector<std::string> Victim(int done_attempt) {
  return {"sh", "-c",
          absl::StrCat("trap 'echo checkpointed attempt=$ATHANOR_ATTEMPT; exit 0' TERM; "
                       "if [ \"$ATHANOR_ATTEMPT\" -ge ", done_attempt,
                       " ]; then exit 0; fi; while :; do sleep 0.05; done")};
}

class SchedulingTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    cluster_ = std::make_unique<LocalCluster>(std::move(flags));
    cluster_->StartCoordinator();
    cluster_->StartAgent("node-a", 2);
    cluster_->StartAgent("node-b", 2);
    ASSERT_TRUE(cluster_->WaitForNodesUp(2)) << cluster_->CoordinatorLog();
  }
  std::string Submit(std::vector<std::string> args, const std::vector<std::string>& cmd) {
    args.insert(args.begin(), "submit");
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    CliResult r = cluster_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  rpc::Job Job(const std::string& id) { return cluster_->GetJob(id); }
  // Waits until job `id` is RUNNING in attempt `attempt`.
  bool WaitRunning(const std::string& id, int attempt) {
    return LocalCluster::WaitFor([&] {
      rpc::Job j = Job(id);
      return j.state() == rpc::JOB_RUNNING && j.attempt() == attempt;
    });
  }
  bool WaitState(const std::string& id, rpc::JobState state) {
    return LocalCluster::WaitFor([&] { return Job(id).state() == state; });
  }
  // Tenant "team" (quota 2 GPUs) runs A on one 2-GPU node and queues B;
  // then tenant "other" queues C, a gang of both nodes, which holds the
  // reservation. Returns {A, B, C} once B is explained.
  std::vector<std::string> QueueBehindQuota() {
    std::string a = Submit({"--tenant", "team", "--nodes", "1", "--gpus-per-node", "2"}, Victim(100));
    EXPECT_TRUE(WaitRunning(a, 1));
    std::string b = Submit({"--tenant", "team", "--nodes", "1", "--gpus-per-node", "2"}, Victim(100));
    std::string c = Submit({"--tenant", "other", "--nodes", "2", "--gpus-per-node", "2"}, Victim(100));
    // Both wait; give the scheduler a pass after C's submission.
    EXPECT_TRUE(LocalCluster::WaitFor([&] {
      return cluster_->Cli({"why", c}).out.find("reservation") != std::string::npos;
    }));
    EXPECT_EQ(cluster_->Cli({"why", b}).out,
              "job " + b + ": PENDING\n  - quota: tenant team uses 2 of 2 GPUs; the job needs 2\n"
              "  - position 1 of 2 in the queue\n");
    return {a, b, c};
  }
  rpc::Node Node(const std::string& name) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    rpc::ListNodesResponse r;
    EXPECT_TRUE(cluster_->stub().ListNodes(&ctx, rpc::ListNodesRequest(), &r).ok());
    for (const rpc::Node& n : r.nodes()) {
      if (n.name() == name) return n;
    }
    return rpc::Node();
  }
  std::string RankLogs(const std::string& id, int attempt) {
    std::string out;
    for (const char* node : {"node-a", "node-b"}) {
      for (int r = 0; r < 4; ++r) {
        out += ReadFile(absl::StrCat(cluster_->dir(), "/", node, "/jobs/", id, "/attempt-", attempt,
                                     "/rank-", r, ".log"));
      }
    }
    return out;
  }
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(SchedulingTest, HighPriorityJobPreemptsPreemptibleJobWhichResumes) {
  Start({"--min-run-time-s", "0", "--default-grace-s", "10"});
  std::string low = Submit({"--nodes", "2", "--gpus-per-node", "2", "--preemptible"}, Victim(2));
  ASSERT_TRUE(WaitRunning(low, 1)) << cluster_->CoordinatorLog();
  std::string high = Submit({"--nodes", "1", "--gpus-per-node", "2", "--priority", "10"},
                            {"sh", "-c", "echo high"});
  CliResult wait = cluster_->Cli({"wait", high, "--timeout", "30"});
  EXPECT_EQ(wait.out, "job " + high + " SUCCEEDED\n") << wait.err << cluster_->CoordinatorLog();
  wait = cluster_->Cli({"wait", low, "--timeout", "30"});
  EXPECT_EQ(wait.out, "job " + low + " SUCCEEDED\n") << wait.err;
  rpc::Job job = Job(low);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);  // a preemption consumes no restart
  // Every rank of attempt 1 took the graceful path (SIGTERM, exit 0).
  std::string logs = RankLogs(low, 1);
  for (int r = 0; r < 4; ++r) {
    size_t at = 0, n = 0;
    while ((at = logs.find("checkpointed attempt=1", at)) != std::string::npos) ++n, ++at;
    EXPECT_EQ(n, 4u) << logs;
  }
  EXPECT_NE(cluster_->CoordinatorLog().find("preempted for a higher-priority job"), std::string::npos);
}

TEST_F(SchedulingTest, DrainMovesJobOffNodeAndPreemptRequeuesIt) {
  Start({"--min-run-time-s", "0"});
  std::string id = Submit({"--nodes", "1", "--gpus-per-node", "2"}, Victim(100));
  ASSERT_TRUE(WaitRunning(id, 1));
  std::string first = Job(id).allocation(0).node();
  std::string other = first == "node-a" ? "node-b" : "node-a";
  CliResult r = cluster_->Cli({"drain", first, "--grace", "5s", "--reason", "maintenance"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "node " + first + ": DRAINING (maintenance)\n");
  ASSERT_TRUE(WaitRunning(id, 2)) << cluster_->CoordinatorLog();
  rpc::Job job = Job(id);
  EXPECT_EQ(job.allocation(0).node(), other);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_NE(RankLogs(id, 1).find("checkpointed attempt=1"), std::string::npos);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Node(first).state() == rpc::NODE_DRAINED; }));
  EXPECT_EQ(Node(first).reason(), "maintenance");
  r = cluster_->Cli({"why", id});
  EXPECT_EQ(r.out, "job " + id + ": RUNNING\n  - RUNNING on " + other + " (attempt 2)\n");
  r = cluster_->Cli({"undrain", first});
  EXPECT_EQ(r.out, "node " + first + ": UP\n");

  r = cluster_->Cli({"preempt", id, "--grace", "5s"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "job " + id + ": PREEMPTING (stopping: preempted by an admin)\n");
  ASSERT_TRUE(WaitRunning(id, 3)) << cluster_->CoordinatorLog();
  EXPECT_EQ(Job(id).restarts(), 0);
  r = cluster_->Cli({"preempt", "999"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("athanor preempt: no job '999' (NOT_FOUND", 0), 0u) << r.err;
  EXPECT_EQ(cluster_->Cli({"cancel", id}).exit_code, 0);
  EXPECT_TRUE(WaitState(id, rpc::JOB_CANCELLED));
}

// With --strict-fair-share, tenant "other" (using nothing) goes first, so its
// later job C holds the reservation B then waits behind; by default B, the
// older, would start as soon as its quota allowed.
TEST_F(SchedulingTest, WhyExplainsQuotaFitAndReservationAndUsageIsExact) {
  Start({"--quota", "team=2", "--strict-fair-share"});
  CliResult r = cluster_->Cli({"quota"});
  EXPECT_EQ(r.out, "TENANT  QUOTA GPUS  GPUS IN USE\nteam    2           0\n");
  const std::vector<std::string> abc = QueueBehindQuota();
  ASSERT_FALSE(HasFailure());
  const std::string &a = abc[0], &b = abc[1], &c = abc[2];
  r = cluster_->Cli({"why", c});
  EXPECT_EQ(r.out, "job " + c + ": PENDING\n"
                   "  - no node fits: needs 2 nodes with 2 free GPUs each; 1 node has them free\n"
                   "  - holds the reservation; starts at an unknown time (running jobs declare no "
                   "time limit)\n"
                   "  - position 2 of 2 in the queue\n");
  // Raising the quota frees B from it; it then waits behind C's reservation.
  r = cluster_->Cli({"quota", "set", "team", "4"});
  EXPECT_EQ(r.out, "TENANT  QUOTA GPUS  GPUS IN USE\nteam    4           2\n");
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    return cluster_->Cli({"why", b}).out.find("reservation for job " + c) != std::string::npos;
  })) << cluster_->Cli({"why", b}).out;
  r = cluster_->Cli({"why", b, "--json"});
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["state"], "JOB_PENDING");
  EXPECT_EQ(j["queue_position"], 1);
  EXPECT_EQ(cluster_->Cli({"cancel", c}).exit_code, 0);
  ASSERT_TRUE(WaitRunning(b, 1));

  // Usage: A's GPU-seconds match its measured run time (2 GPUs).
  EXPECT_EQ(cluster_->Cli({"cancel", a}).exit_code, 0);
  ASSERT_TRUE(WaitState(a, rpc::JOB_CANCELLED));
  rpc::Job job = Job(a);
  double expect = 2.0 * static_cast<double>(job.end_time_unix() - job.start_time_unix());
  auto a_usage = [&] {
    nlohmann::json u = nlohmann::json::parse(cluster_->Cli({"usage", "--tenant", "team", "--json"}).out);
    for (const auto& row : u["rows"]) {
      if (row["job_id"] == a) return row["gpu_seconds"].get<double>();
    }
    return -1.0;
  };
  double got = a_usage();
  EXPECT_NEAR(got, expect, 2.0 * 1.5) << "start " << job.start_time_unix() << " end "
                                      << job.end_time_unix();
  EXPECT_NEAR(job.gpu_seconds(), got, 1e-6);
  r = cluster_->Cli({"usage"});
  EXPECT_EQ(r.out.rfind("TENANT  JOB  GPU-SECONDS", 0), 0u) << r.out;
  // kill -9 and restart: usage and quotas are kept exactly.
  cluster_->KillCoordinator();
  cluster_->StartCoordinator();
  EXPECT_NEAR(a_usage(), got, 1e-6);
  EXPECT_EQ(cluster_->Cli({"quota"}).out, "TENANT  QUOTA GPUS  GPUS IN USE\nteam    4           2\n");
  EXPECT_EQ(cluster_->Cli({"cancel", b}).exit_code, 0);
  EXPECT_TRUE(WaitState(b, rpc::JOB_CANCELLED));
}

// The same queue under the default: B, submitted before C, starts once its
// quota allows, though its tenant uses more; C keeps the reservation.
TEST_F(SchedulingTest, TheOlderJobStartsFirstOnceItsQuotaAllows) {
  Start({"--quota", "team=2"});
  const std::vector<std::string> abc = QueueBehindQuota();
  ASSERT_FALSE(HasFailure());
  const std::string &a = abc[0], &b = abc[1], &c = abc[2];
  EXPECT_EQ(cluster_->Cli({"quota", "set", "team", "4"}).exit_code, 0);
  ASSERT_TRUE(WaitRunning(b, 1)) << cluster_->Cli({"why", b}).out;
  EXPECT_EQ(cluster_->Cli({"why", c}).out,
            "job " + c + ": PENDING\n"
            "  - no node fits: needs 2 nodes with 2 free GPUs each; 0 nodes have them free\n"
            "  - holds the reservation; starts at an unknown time (running jobs declare no "
            "time limit)\n"
            "  - position 1 of 1 in the queue\n");
  for (const std::string& id : {a, b, c}) EXPECT_EQ(cluster_->Cli({"cancel", id}).exit_code, 0);
  EXPECT_TRUE(WaitState(c, rpc::JOB_CANCELLED));
}

}  // namespace
}  // namespace athanor::testing

namespace athanor::testing {
namespace {

TEST_F(SchedulingTest, JobsLandOnlyOnNodesMeetingTheirRequirements) {
  cluster_ = std::make_unique<LocalCluster>();
  cluster_->StartCoordinator();
  cluster_->StartAgent("node-a", 2, "127.0.0.1",
                       {"--gpu-model", "A100", "--gpu-memory-mb", "40960", "--cpus", "8",
                        "--memory-mb", "65536", "--labels", "rack=r1"});
  cluster_->StartAgent("node-b", 2, "127.0.0.1",
                       {"--gpu-model", "H100", "--gpu-memory-mb", "81920", "--cpus", "16",
                        "--memory-mb", "131072", "--labels", "rack=r2"});
  ASSERT_TRUE(cluster_->WaitForNodesUp(2));
  std::string h = Submit({"--nodes", "1", "--gpus-per-node", "1", "--gpu-model", "H100"},
                         {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  std::string big = Submit({"--nodes", "1", "--gpus-per-node", "2", "--min-gpu-memory", "80G",
                            "--cpus-per-node", "12", "--memory-per-node", "100G"},
                           {"true"});
  EXPECT_EQ(cluster_->Cli({"wait", h, "--timeout", "20"}).exit_code, 0);
  EXPECT_EQ(cluster_->Cli({"wait", big, "--timeout", "20"}).exit_code, 0);
  EXPECT_EQ(Job(h).allocation(0).node(), "node-b");
  EXPECT_EQ(Job(big).allocation(0).node(), "node-b");
  CliResult r = cluster_->Cli({"submit", "--nodes", "1", "--gpus-per-node", "1", "--gpu-model",
                               "A100", "--min-gpu-memory", "80G", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("athanor submit: job can never fit: it needs 1 node with 1 free GPU "
                        "(model A100, >= 81920 MB per GPU); only 0 node(s) in the inventory qualify",
                        0),
            0u)
      << r.err;
  r = cluster_->Cli({"nodes"});
  EXPECT_NE(r.out.find("H100   81920M   16    131072M  rack=r2"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace athanor::testing
