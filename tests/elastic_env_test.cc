// An elastic job (--nodes 2:3) through the running coordinator and three
// agents on loopback: kill -9 of one agent shrinks it to 2 without using a
// restart, the agent's return and a committed checkpoint grow it back to 3,
// and every start of the worker group sees the env contract of its size
// (WORLD_SIZE 3, then 2, then 3, as torchrun's elastic agent gives it), with
// the job's global batch unchanged. `athanor job` shows both resizes.
#include <chrono>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// The "ATTEMPT WORLD_SIZE GLOBAL_BATCH" lines the ranks wrote, one per start.
std::vector<std::string> Starts(const std::string& path) {
  std::vector<std::string> out = absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
  return out;
}

size_t Count(const std::vector<std::string>& lines, const std::string& line) {
  size_t n = 0;
  for (const std::string& l : lines) n += l == line;
  return n;
}

TEST(ElasticEnvTest, ShrinksOnALostAgentAndGrowsBackAtACheckpoint) {
  LocalCluster cluster({"--heartbeat-timeout-s", "3"});
  cluster.StartCoordinator();
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartAgent(node, 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(3)) << cluster.CoordinatorLog();
  const std::string starts = cluster.dir() + "/starts";
  CliResult sub = cluster.Cli({"submit", "--name", "elastic", "--nodes", "2:3", "--gpus-per-node", "1",
                               "--global-batch", "6", "--", "sh", "-c",
                               "echo \"$ATHANOR_ATTEMPT $WORLD_SIZE $ATHANOR_GLOBAL_BATCH\" >> " + starts +
                                   " && exec sleep 600"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Count(Starts(starts), "1 3 6") == 3; }))
      << ReadFile(starts) << cluster.CoordinatorLog();

  // A node lost: the survivors start again as a world of 2.
  const auto lost = std::chrono::steady_clock::now();
  cluster.KillAgent("node-c");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Count(Starts(starts), "2 2 6") == 2; }))
      << ReadFile(starts) << cluster.CoordinatorLog();
  const double shrink_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - lost).count();
  std::cout << "elastic: node lost -> survivors started at world 2 in " << shrink_s
            << " s (heartbeat timeout 3 s)\n";
  rpc::Job job = cluster.GetJob(id);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.allocation_size(), 2);
  ASSERT_GE(job.attempts_size(), 1);
  EXPECT_EQ(job.attempts(0).outcome(), "shrunk");

  // The node comes back; at the next committed checkpoint the job grows.
  cluster.StartAgent("node-c", 1);
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    CliResult nodes = cluster.Cli({"nodes"});
    return nodes.out.find("DOWN") == std::string::npos;
  })) << cluster.CoordinatorLog();
  rpc::ReportCheckpointRequest req;
  req.set_job_id(id);
  req.set_step(4);
  rpc::ReportCheckpointResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = cluster.AgentStub(job.allocation(0).node())->ReportCheckpoint(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Count(Starts(starts), "3 3 6") == 3; }))
      << ReadFile(starts) << cluster.CoordinatorLog();
  // Every start saw its world: 3 (attempt 1), 2 (attempt 2), 3 (attempt 3).
  EXPECT_EQ(Starts(starts).size(), 8u) << ReadFile(starts);
  job = cluster.GetJob(id);
  EXPECT_EQ(job.attempt(), 3);
  EXPECT_EQ(job.restarts(), 0);
  ASSERT_EQ(job.attempts_size(), 3);
  EXPECT_EQ(job.attempts(1).outcome(), "grown");
  CliResult shown = cluster.Cli({"job", id});
  EXPECT_NE(shown.out.find("3 of 2..3 node(s) x 1 GPU(s), elastic"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("attempt 1: shrunk 3 -> 2 node(s), 0 step(s) lost: shrunk: node node-c went DOWN"),
            std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("attempt 2: grown 2 -> 3 node(s), 0 step(s) lost: grown at checkpoint step 4: 1 more "
                           "node(s) free (2 -> 3 of at most 3)"),
            std::string::npos) << shown.out;
  EXPECT_EQ(cluster.Cli({"cancel", id}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
