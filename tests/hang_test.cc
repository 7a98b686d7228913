// End to end: a rank of a two-node athanor-train job is stopped (SIGSTOP, a
// hang that no collective timeout catches soon). The coordinator sees its
// progress stop, names it as the suspect, has the agents capture every rank's
// stacks into the job's logs, and requeues the attempt, which resumes from the
// newest committed checkpoint and finishes.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The pid the agent logged for `rank` of `job`'s `attempt`; 0 when not yet.
pid_t RankPid(const LocalCluster& c, const std::string& job, int attempt, int rank) {
  std::regex re(absl::StrCat("started job ", job, " attempt ", attempt, " rank ", rank,
                             " pid (\\d+)"));
  for (const char* node : {"node-a", "node-b"}) {
    std::string log = ReadFile(absl::StrCat(c.dir(), "/agent-", node, ".log"));
    std::smatch m;
    if (std::regex_search(log, m, re)) return static_cast<pid_t>(std::stoi(m[1]));
  }
  return 0;
}

TEST(HangTest, StoppedRankIsDetectedNamedStackedAndRequeued) {
  LocalCluster cluster({"--checkpoint-poll-s", "0.2", "--hang-drain-after", "0"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const int kHangTimeoutS = 6;
  std::vector<std::string> cmd = {
      std::string(std::getenv("ATHANOR_BIN_DIR")) + "/athanor-train", "--seed", "5", "--hidden",
      "48", "--lr", "0.05", "--timeout-s", "60", "--steps", "400", "--checkpoint-every", "5"};
  std::vector<std::string> args = {"submit", "--nodes", "2", "--gpus-per-node", "1",
                                   "--max-restarts", "2", "--hang-timeout",
                                   absl::StrCat(kHangTimeoutS, "s"), "--checkpoint-uri",
                                   "file://" + cluster.dir() + "/store", "--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  CliResult sub = cluster.Cli(args);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));

  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).committed_step() >= 10; },
                                    std::chrono::seconds(60)))
      << cluster.CoordinatorLog();
  rpc::Job before = cluster.GetJob(id);
  ASSERT_EQ(before.attempt(), 1);
  std::string node1;
  for (const rpc::RankPlacement& p : before.allocation()) {
    if (p.rank() == 1) node1 = p.node();
  }
  const pid_t pid = RankPid(cluster, id, 1, 1);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(-pid, SIGSTOP), 0);  // the rank's whole process group
  const auto stopped_at = SteadyClock::now();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).has_last_hang(); },
                                    std::chrono::seconds(kHangTimeoutS + 15)))
      << cluster.CoordinatorLog();
  const double detect_s =
      std::chrono::duration<double>(SteadyClock::now() - stopped_at).count();
  rpc::Job hung = cluster.GetJob(id);
  std::cerr << "hang detected " << detect_s << " s after SIGSTOP (timeout " << kHangTimeoutS
            << " s): " << hung.last_hang().reason() << "\n";
  EXPECT_LE(detect_s, kHangTimeoutS + 5);
  EXPECT_EQ(hung.last_hang().attempt(), 1);
  EXPECT_EQ(hung.last_hang().rank(), 1);
  EXPECT_EQ(hung.last_hang().node(), node1);
  EXPECT_TRUE(std::regex_search(
      hung.last_hang().reason(),
      std::regex("^hang: rank 1 on " + node1 +
                 " made no progress for [0-9]+ s \\(a process of it is stopped; ")))
      << hung.last_hang().reason();

  CliResult wait = cluster.Cli({"wait", id, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << cluster.CoordinatorLog();
  rpc::Job done = cluster.GetJob(id);
  EXPECT_EQ(done.attempt(), 2);
  EXPECT_EQ(done.restarts(), 1);
  CliResult shown = cluster.Cli({"job", id});
  EXPECT_TRUE(std::regex_search(shown.out, std::regex("\nlast hang: +attempt 1: hang: rank 1 on " + node1 + " ")))
      << shown.out;
  // Every rank's stacks are in attempt 1's logs; the stopped one's too.
  for (int rank = 0; rank < 2; ++rank) {
    CliResult logs = cluster.Cli({"logs", id, "--rank", std::to_string(rank), "--attempt", "1"});
    EXPECT_NE(logs.out.find(absl::StrCat("athanor: hang detected; thread stacks of rank ", rank)),
              std::string::npos)
        << logs.out;
    EXPECT_TRUE(std::regex_search(logs.out, std::regex("#[0-9]+ +0x[0-9a-f]+")))
        << "no stack frames in rank " << rank << "'s log:\n" << logs.out;
  }
}

}  // namespace
}  // namespace athanor::testing
