// An elastic job (--nodes 2:3) through the running coordinator and three
// agents on loopback: kill -9 of one agent shrinks it to 2 without using a
// restart, the agent's return and a committed checkpoint grow it back to 3,
// and every start of the worker group sees the env contract of its size
// (WORLD_SIZE 3, then 2, then 3, as torchrun's elastic agent gives it), with
// the job's global batch unchanged. `athanor job` shows both resizes. The
// same with an unmodified elastic PyTorch script.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
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

// A committed checkpoint of `step`, as the job's agent reports it.
grpc::Status ReportCheckpoint(LocalCluster& cluster, const rpc::Job& job, int64_t step) {
  rpc::ReportCheckpointRequest req;
  req.set_job_id(job.id());
  req.set_step(step);
  rpc::ReportCheckpointResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return cluster.AgentStub(job.allocation(0).node())->ReportCheckpoint(&ctx, req, &resp);
}

// Once every node is UP again.
bool NoneDown(LocalCluster& cluster) {
  return LocalCluster::WaitFor([&] { return cluster.Cli({"nodes"}).out.find("DOWN") == std::string::npos; });
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
  ASSERT_TRUE(NoneDown(cluster)) << cluster.CoordinatorLog();
  grpc::Status s = ReportCheckpoint(cluster, job, 4);
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

// The lines "WORLD_SIZE RANK RESUMED_STEP SUM RESTARTS" of
// elastic_torch_worker.py's starts at world size `world`.
std::vector<std::vector<int64_t>> TorchStarts(const std::string& path, int world) {
  std::vector<std::vector<int64_t>> out;
  for (const std::string& line : Starts(path)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    std::vector<int64_t> v;
    for (const std::string& x : f) {
      int64_t n = -1;
      if (!absl::SimpleAtoi(x, &n)) n = -1;
      v.push_back(n);
    }
    if (v.size() == 5 && v[0] == world) out.push_back(v);
  }
  return out;
}

// The same with an unmodified elastic PyTorch script (Debian's python3-torch,
// gloo on CPU), restarted by the platform as torchrun's agent restarts it:
// every start of the worker group forms its process group from the env
// contract, all-reduces across the whole world and resumes from the
// script's own checkpoint.
TEST(ElasticEnvTest, AnElasticPyTorchScriptRunsAt3Then2Then3) {
  ASSERT_EQ(std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null"), 0)
      << "Debian's python3-torch is missing: scripts/install-test-tools installs it";
  LocalCluster cluster({"--heartbeat-timeout-s", "3"});
  cluster.StartCoordinator();
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartAgent(node, 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(3)) << cluster.CoordinatorLog();
  const std::string log = cluster.dir() + "/torch-starts", ckpt = cluster.dir() + "/torch-ckpt";
  ASSERT_EQ(mkdir(ckpt.c_str(), 0777), 0);
  ASSERT_EQ(chmod(ckpt.c_str(), 0777), 0);  // ranks run as the tenant's uid
  // PyTorch's rank 0 binds MASTER_PORT itself (its TCPStore), so the agents
  // must not hold it for the attempt.
  CliResult sub = cluster.Cli({"submit", "--name", "torch-elastic", "--nodes", "2:3", "--gpus-per-node", "1",
                               "--env", "ATHANOR_RANK0_BINDS_MASTER_PORT=1", "--",
                               "/usr/bin/python3", cluster.BinFile("elastic_torch_worker.py"), log, ckpt});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  auto logs = [&] {  // the starts, the ranks' own logs (the last lines of each), the coordinator's
    std::string out = ReadFile(log);
    for (const auto& e : std::filesystem::recursive_directory_iterator(cluster.dir())) {
      const std::string name = e.path().filename().string();
      if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".log") continue;
      const std::string text = ReadFile(e.path().string());
      out += "\n== " + e.path().string() + "\n" + text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
    }
    return out + "\n" + cluster.CoordinatorLog();
  };
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return TorchStarts(log, 3).size() == 3; })) << logs();
  for (const auto& start : TorchStarts(log, 3)) {
    EXPECT_EQ(start[2], 0);  // nothing to resume from yet
    EXPECT_EQ(start[3], 1 + 2 + 3);
    EXPECT_EQ(start[4], 0);  // TORCHELASTIC_RESTART_COUNT
  }

  cluster.KillAgent("node-c");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return TorchStarts(log, 2).size() == 2; })) << logs();
  const int64_t resumed = TorchStarts(log, 2)[0][2];
  for (const auto& start : TorchStarts(log, 2)) {
    EXPECT_EQ(start[2], resumed);  // both ranks from the same checkpoint
    EXPECT_GT(start[2], 0);
    EXPECT_EQ(start[3], 1 + 2);
    EXPECT_EQ(start[4], 1);
  }
  rpc::Job job = cluster.GetJob(id);
  EXPECT_EQ(job.restarts(), 0);
  ASSERT_GE(job.attempts_size(), 1);
  EXPECT_EQ(job.attempts(0).outcome(), "shrunk");

  cluster.StartAgent("node-c", 1);
  ASSERT_TRUE(NoneDown(cluster)) << cluster.CoordinatorLog();
  grpc::Status s = ReportCheckpoint(cluster, job, 1);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return TorchStarts(log, 3).size() == 6; })) << logs();
  auto grown = TorchStarts(log, 3);
  for (size_t i = 3; i < grown.size(); ++i) {
    EXPECT_EQ(grown[i][2], grown[3][2]);
    EXPECT_GT(grown[i][2], resumed);  // trained at world 2 in between
    EXPECT_EQ(grown[i][3], 1 + 2 + 3);
    EXPECT_EQ(grown[i][4], 2);
  }
  job = cluster.GetJob(id);
  EXPECT_EQ(job.attempt(), 3);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(cluster.Cli({"cancel", id}).exit_code, 0);
  std::cout << "PyTorch starts (WORLD_SIZE RANK RESUMED_STEP SUM RESTARTS):\n" << ReadFile(log);
}

}  // namespace
}  // namespace athanor::testing
