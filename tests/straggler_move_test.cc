// End to end: a two-node athanor-train job submitted with
// --move-off-stragglers on three agents. Rank 1 is made 3x slower in the
// first attempt only (athanor-train's --inject-slow hook), standing for a
// slow node. The coordinator flags it, stops the attempt as a preemption
// (the ranks checkpoint in their grace; no restart counted) and requeues the
// job avoiding that node: the second attempt runs on the two other nodes and
// resumes from the checkpoint the first one saved.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

std::string NodeOf(const rpc::Job& job, int rank) {
  for (const rpc::RankPlacement& p : job.allocation()) {
    if (p.rank() == rank) return p.node();
  }
  return "";
}

TEST(StragglerMoveTest, FlaggedRankMovesTheJobToOtherNodesWhereItResumes) {
  LocalCluster cluster({"--checkpoint-poll-s", "0.2", "--straggler-window-s", "2",
                        "--straggler-windows", "3"});
  cluster.StartCoordinator();
  for (const char* node : {"node-a", "node-b", "node-c"}) cluster.StartAgent(node, 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(3));
  const std::string bin = std::getenv("ATHANOR_BIN_DIR");
  // About 25 ms a step here; rank 1 three times that from step 40 of attempt
  // 1 on. Far more steps than the test waits for: it is cancelled at the end.
  CliResult sub = cluster.Cli({"submit", "--nodes", "2", "--gpus-per-node", "1", "--move-off-stragglers",
                               "--grace", "20s", "--checkpoint-uri", "file://" + cluster.dir() + "/store",
                               "--env", "OPENBLAS_NUM_THREADS=1", "--", bin + "/athanor-train", "--hidden",
                               "512", "--layers", "2", "--micro-batch", "32", "--steps", "1000000",
                               "--checkpoint-every", "50", "--timeout-s", "30", "--inject-slow",
                               "1:40:1000000:3:1"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));

  std::string slow_node;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        rpc::Job job = cluster.GetJob(id);
        if (job.attempt() == 1 && slow_node.empty()) slow_node = NodeOf(job, 1);
        return job.attempt() == 2 && job.state() == rpc::JOB_RUNNING;
      },
      std::chrono::seconds(60)))
      << cluster.CoordinatorLog();
  ASSERT_FALSE(slow_node.empty());
  rpc::Job moved = cluster.GetJob(id);
  EXPECT_EQ(moved.restarts(), 0);  // a move is not a failure
  ASSERT_EQ(moved.avoid_nodes_size(), 1);
  EXPECT_EQ(moved.avoid_nodes(0), slow_node);
  ASSERT_EQ(moved.allocation_size(), 2);
  for (const rpc::RankPlacement& p : moved.allocation()) EXPECT_NE(p.node(), slow_node);
  // Why: the flag, then the requeue that names it.
  const std::string log = cluster.CoordinatorLog();
  EXPECT_TRUE(std::regex_search(
      log, std::regex("job " + id + " -> PENDING: requeued after attempt 1: moving off a straggler: rank 1 on " +
                      slow_node + " \\(straggler: compute [0-9.]+x the gang median over 3 windows\\)")))
      << log;
  CliResult shown = cluster.Cli({"job", id});
  EXPECT_NE(shown.out.find("moves off a straggler's node; avoids " + slow_node + "\n"), std::string::npos)
      << shown.out;

  // The second attempt resumes from the step the first one checkpointed in
  // its grace (SIGTERM: the ranks agree on a step and save it).
  std::string resumed;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        CliResult logs = cluster.Cli({"logs", id, "--rank", "0", "--attempt", "2"});
        std::smatch m;
        if (!std::regex_search(logs.out, m, std::regex("\\{\"event\":\"resume\",\"step\":([0-9]+)"))) return false;
        resumed = m[1];
        return true;
      },
      std::chrono::seconds(30)))
      << cluster.CoordinatorLog();
  EXPECT_GE(std::stoll(resumed), 40);
  CliResult attempt1 = cluster.Cli({"logs", id, "--rank", "0", "--attempt", "1"});
  EXPECT_NE(attempt1.out.find("\"event\":\"preempted\""), std::string::npos) << attempt1.out;

  CliResult cancel = cluster.Cli({"cancel", id});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
}

}  // namespace
}  // namespace athanor::testing
