// Integration tests of interactive allocations (`athanor alloc`: idle
// reclaim, work dir archive) and of the agent's health check, on a real
// coordinator and agents.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

rpc::Node GetNode(LocalCluster& c, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  rpc::ListNodesResponse r;
  EXPECT_TRUE(c.stub().ListNodes(&ctx, rpc::ListNodesRequest(), &r).ok());
  for (const rpc::Node& n : r.nodes()) {
    if (n.name() == name) return n;
  }
  return rpc::Node();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST(InteractiveTest, IdleAllocationIsReclaimedBusyOneIsNotAndWorkDirIsArchived) {
  LocalCluster cluster({"--idle-reclaim-grace-s", "1"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  // The idle one leaves a file in its work dir (its cwd), then sleeps.
  CliResult r = cluster.Cli({"alloc", "--nodes", "1", "--gpus-per-node", "1", "--idle-timeout",
                             "3s", "--", "sh", "-c", "echo notes > notebook.txt; exec sleep 300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string idle = r.out.substr(0, r.out.find('\n'));
  r = cluster.Cli({"alloc", "--nodes", "1", "--gpus-per-node", "1", "--idle-timeout", "3s", "--",
                   "sh", "-c", "while :; do :; done"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string busy = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(idle).state() == rpc::JOB_RUNNING; }));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.GetJob(idle).state() == rpc::JOB_CANCELLED; }, std::chrono::seconds(30)))
      << cluster.CoordinatorLog();
  // Not before timeout + grace (3 s + 1 s), by the coordinator's own clock
  // (the test's clock would be racy: it cannot see when idleness began).
  rpc::Job job = cluster.GetJob(idle);
  int idle_s = -1;
  ASSERT_EQ(std::sscanf(job.reason().c_str(), "reclaimed: idle for %d s", &idle_s), 1) << job.reason();
  EXPECT_GE(idle_s, 4) << job.reason();
  EXPECT_EQ(job.attempt(), 1);
  rpc::Job other = cluster.GetJob(busy);
  EXPECT_EQ(other.state(), rpc::JOB_RUNNING) << other.reason();
  EXPECT_EQ(other.reason(), "");
  // The warning reached the rank's log, and the work dir went to the archive.
  const std::string node_dir = cluster.dir() + "/" + job.allocation(0).node();
  std::string log = ReadFile(absl::StrCat(node_dir, "/jobs/", idle, "/attempt-1/rank-0.log"));
  EXPECT_NE(log.find("athanor: idle since "), std::string::npos) << log;
  const std::string tar = absl::StrCat(node_dir, "/archive/", idle, "/workdir/rank-0.tar");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Exists(tar); })) << tar;
  std::string archive = ReadFile(tar);
  EXPECT_EQ(archive.size() % 512, 0u);
  EXPECT_EQ(archive.substr(0, 12), std::string("notebook.txt", 12));
  EXPECT_EQ(archive.substr(257, 5), "ustar");
  EXPECT_EQ(archive.substr(512, 6), "notes\n");
  EXPECT_FALSE(Exists(absl::StrCat(node_dir, "/jobs/", idle, "/attempt-1/rank-0")));
  EXPECT_EQ(cluster.Cli({"cancel", busy}).exit_code, 0);
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.GetJob(busy).state() == rpc::JOB_CANCELLED; }));
}

TEST(InteractiveTest, FailingHealthCheckDrainsNodeWithItsOutput) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  const std::string flag = cluster.dir() + "/sick";
  cluster.StartAgent("node-a", 1, "127.0.0.1",
                     {"--health-check", "if [ -e " + flag + " ]; then echo ECC errors; exit 1; fi",
                      "--health-interval", "0.2"});
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  std::ofstream(flag) << "x";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return GetNode(cluster, "node-a").state() == rpc::NODE_DRAINED; }))
      << cluster.CoordinatorLog();
  EXPECT_EQ(GetNode(cluster, "node-a").reason(), "health check failed: ECC errors");
  CliResult r = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "true"});
  ASSERT_EQ(r.exit_code, 0);
  std::string id = r.out.substr(0, r.out.find('\n'));
  r = cluster.Cli({"why", id});
  EXPECT_NE(r.out.find("no node fits"), std::string::npos) << r.out;
  // Fixed and undrained by an admin: work lands again.
  std::remove(flag.c_str());
  EXPECT_EQ(cluster.Cli({"undrain", "node-a"}).exit_code, 0);
  EXPECT_EQ(cluster.Cli({"wait", id, "--timeout", "20"}).out, "job " + id + " SUCCEEDED\n");
}

// The agent's header promised that a check running past the interval fails;
// before, a hung check (here: one that never ends) kept the node healthy.
TEST(InteractiveTest, HealthCheckThatRunsPastTheIntervalDrainsTheNode) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1, "127.0.0.1",
                     {"--health-check", "echo checking; exec sleep 600", "--health-interval", "0.3"});
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return GetNode(cluster, "node-a").state() == rpc::NODE_DRAINED; }, std::chrono::seconds(30)))
      << cluster.CoordinatorLog();
  EXPECT_EQ(GetNode(cluster, "node-a").reason(), "health check failed: timed out after 300ms: checking");
}

}  // namespace
}  // namespace athanor::testing
