// End to end: a rank of a two-node athanor-train job is stopped (SIGSTOP, a
// hang that no collective timeout catches soon). The coordinator sees its
// progress stop, names it as the suspect, has the agents capture every rank's
// stacks into the job's logs, and requeues the attempt, which resumes from the
// newest committed checkpoint and finishes. Then a series of ten hangs, drawn
// from a printed seed (ATHANOR_HANG_SEED replays one): a random rank stopped,
// or a random rank that skips one all-reduce (athanor-train's test hook
// ATHANOR_TEST_SKIP_ALLREDUCE); each must be detected within the timeout plus
// 5 s with the right suspect named, and each job must finish in its requeued
// attempt.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
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
  std::regex re(
      absl::StrCat("started job ", job, " attempt ", attempt, " rank ", rank, " pid (\\d+)"));
  for (const char* node : {"node-a", "node-b"}) {
    std::string log = ReadFile(absl::StrCat(c.dir(), "/agent-", node, ".log"));
    std::smatch m;
    if (std::regex_search(log, m, re)) return static_cast<pid_t>(std::stoi(m[1]));
  }
  return 0;
}

// Rank `rank`'s log of `job`'s `attempt` on `node` ("" when missing).
std::string RankLog(const LocalCluster& c, const std::string& node, const std::string& job,
                    int attempt, int rank) {
  return ReadFile(absl::StrCat(c.dir(), "/", node, "/jobs/", job, "/attempt-", attempt, "/rank-",
                               rank, ".log"));
}

// The newest step rank 0 printed in `log`; -1 when none.
int64_t LastStep(const std::string& log) {
  static const std::regex re("\\{\"step\":([0-9]+),");
  int64_t last = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    last = std::stoll((*it)[1]);
  }
  return last;
}

std::string NodeOf(const rpc::Job& job, int rank) {
  for (const rpc::RankPlacement& p : job.allocation()) {
    if (p.rank() == rank) return p.node();
  }
  return "";
}

TEST(HangTest, StoppedRankIsDetectedNamedStackedAndRequeued) {
  // The jobs' hang timeouts (5-6 s) are below the default floor of 30 s.
  LocalCluster cluster(
      {"--checkpoint-poll-s", "0.2", "--hang-drain-after", "0", "--hang-timeout-floor-s", "5"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const int kHangTimeoutS = 6;
  std::vector<std::string> cmd = {std::string(std::getenv("ATHANOR_BIN_DIR")) + "/athanor-train",
                                  "--seed",
                                  "5",
                                  "--hidden",
                                  "48",
                                  "--optimizer",
                                  "sgd",
                                  "--lr",
                                  "0.05",
                                  "--timeout-s",
                                  "60",
                                  "--steps",
                                  "400",
                                  "--checkpoint-every",
                                  "5"};
  std::vector<std::string> args = {"submit",
                                   "--nodes",
                                   "2",
                                   "--gpus-per-node",
                                   "1",
                                   "--max-restarts",
                                   "2",
                                   "--hang-timeout",
                                   absl::StrCat(kHangTimeoutS, "s"),
                                   "--checkpoint-uri",
                                   "file://" + cluster.dir() + "/store",
                                   "--"};
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
  const double detect_s = std::chrono::duration<double>(SteadyClock::now() - stopped_at).count();
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
                 " made no progress for [0-9]+ s \\(a process of it is stopped; peers waiting in "
                 "(all-reduce #[0-9]+|checkpoint save)\\)$")))
      << hung.last_hang().reason();

  CliResult wait = cluster.Cli({"wait", id, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << cluster.CoordinatorLog();
  rpc::Job done = cluster.GetJob(id);
  EXPECT_EQ(done.attempt(), 2);
  EXPECT_EQ(done.restarts(), 1);
  CliResult shown = cluster.Cli({"job", id});
  EXPECT_TRUE(std::regex_search(
      shown.out, std::regex("\nlast hang: +attempt 1: hang: rank 1 on " + node1 + " ")))
      << shown.out;
  // Every rank's stacks are in attempt 1's logs; the stopped one's too.
  for (int rank = 0; rank < 2; ++rank) {
    CliResult logs = cluster.Cli({"logs", id, "--rank", std::to_string(rank), "--attempt", "1"});
    EXPECT_NE(logs.out.find(absl::StrCat("athanor: hang detected; thread stacks of rank ", rank)),
              std::string::npos)
        << logs.out;
    EXPECT_TRUE(std::regex_search(logs.out, std::regex("#[0-9]+ +0x[0-9a-f]+")))
        << "no stack frames in rank " << rank << "'s log:\n"
        << logs.out;
  }
}

TEST(HangTest, SeriesOfStoppedAndSkippingRanksIsDetectedAndNamed) {
  uint64_t seed = static_cast<uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count() / 1000 % 1000000);
  if (const char* s = std::getenv("ATHANOR_HANG_SEED"); s != nullptr && *s) seed = std::stoull(s);
  std::cerr << "hang series seed: " << seed << "   (replay: ATHANOR_HANG_SEED=" << seed << ")\n";
  std::mt19937_64 rng(seed);
  // Five of each kind, in an order drawn from the seed.
  std::vector<bool> skips = {false, false, false, false, false, true, true, true, true, true};
  std::shuffle(skips.begin(), skips.end(), rng);

  // The jobs' hang timeouts (5-6 s) are below the default floor of 30 s.
  LocalCluster cluster(
      {"--checkpoint-poll-s", "0.2", "--hang-drain-after", "0", "--hang-timeout-floor-s", "5"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const int kHangTimeoutS = 5;
  const char* kSkipHook = "ATHANOR_TEST_SKIP_ALLREDUCE";
  struct Outcome {
    std::string what;
    double detect_s = 0;
    std::string reason;
    bool named = false;
  };
  std::vector<Outcome> outcomes;
  for (size_t i = 0; i < skips.size(); ++i) {
    LocalCluster::RearmWatchdog();  // each hang is bounded by the waits below
    const bool skip = skips[i];
    const int rank = static_cast<int>(rng() % 2);
    const int64_t step = 8 + static_cast<int64_t>(rng() % 25);
    std::vector<std::string> args = {"submit", "--nodes", "2", "--gpus-per-node", "1"};
    args.insert(args.end(),
                {"--max-restarts", "1", "--hang-timeout", absl::StrCat(kHangTimeoutS, "s")});
    args.insert(args.end(), {"--checkpoint-uri", "file://" + cluster.dir() + "/store"});
    if (skip) args.insert(args.end(), {"--env", absl::StrCat(kSkipHook, "=", rank, ":", step)});
    args.insert(args.end(), {"--", std::string(std::getenv("ATHANOR_BIN_DIR")) + "/athanor-train",
                             "--seed", "5", "--hidden", "48", "--optimizer", "sgd", "--lr", "0.05", "--timeout-s", "60",
                             "--steps", "80", "--checkpoint-every", "5"});
    CliResult sub = cluster.Cli(args);
    ASSERT_EQ(sub.exit_code, 0) << sub.err;
    const std::string id = sub.out.substr(0, sub.out.find('\n'));
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] {
          rpc::Job j = cluster.GetJob(id);
          return j.state() == rpc::JOB_RUNNING && !NodeOf(j, 0).empty() &&
                 RankPid(cluster, id, 1, rank) > 0;
        },
        std::chrono::seconds(60)))
        << cluster.CoordinatorLog();
    rpc::Job job = cluster.GetJob(id);
    const std::string node = NodeOf(job, rank), node0 = NodeOf(job, 0);
    Outcome o;
    o.what = absl::StrCat(skip ? "rank skips an all-reduce: " : "SIGSTOP: ", "rank ", rank, " on ",
                          node, " at step ", step);
    // The moment of the blow: the stop, or the skip the rank's log reports.
    if (skip) {
      ASSERT_TRUE(LocalCluster::WaitFor(
          [&] {
            return RankLog(cluster, node, id, 1, rank)
                       .find(absl::StrCat("rank ", rank, " skips the all-reduce")) !=
                   std::string::npos;
          },
          std::chrono::seconds(60)))
          << o.what << "\n"
          << RankLog(cluster, node, id, 1, rank);
    } else {
      ASSERT_TRUE(
          LocalCluster::WaitFor([&] { return LastStep(RankLog(cluster, node0, id, 1, 0)) >= step; },
                                std::chrono::seconds(60)))
          << o.what << "\n"
          << RankLog(cluster, node0, id, 1, 0);
      ASSERT_EQ(kill(-RankPid(cluster, id, 1, rank), SIGSTOP), 0);
    }
    const auto blow = SteadyClock::now();
    ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).has_last_hang(); },
                                      std::chrono::seconds(kHangTimeoutS + 30)))
        << o.what << "\n"
        << cluster.CoordinatorLog();
    o.detect_s = std::chrono::duration<double>(SteadyClock::now() - blow).count();
    rpc::Job hung = cluster.GetJob(id);
    o.reason = hung.last_hang().reason();
    o.named = hung.last_hang().rank() == rank && hung.last_hang().node() == node &&
              hung.last_hang().attempt() == 1;
    std::cerr << "hang " << i + 1 << " (" << o.what << "): detected after " << o.detect_s
              << " s (timeout " << kHangTimeoutS << " s); " << o.reason << "\n";
    EXPECT_LE(o.detect_s, kHangTimeoutS + 5) << o.what;
    EXPECT_TRUE(o.named) << o.what << ": " << o.reason;
    const std::string why =
        skip ? absl::StrCat("\\(it skipped all-reduce #[0-9]+ that its peers wait in; it waits in ")
             : std::string("\\(a process of it is stopped; peers waiting in "
                           "(all-reduce #[0-9]+|checkpoint save)\\)$");
    EXPECT_TRUE(std::regex_search(o.reason,
                                  std::regex(absl::StrCat("^hang: rank ", rank, " on ", node,
                                                          " made no progress for [0-9]+ s ", why))))
        << o.reason;
    outcomes.push_back(o);
    // The requeued attempt resumes and finishes (the hook is for attempt 1).
    CliResult wait = cluster.Cli({"wait", id, "--timeout", "120"});
    ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << o.what << "\n" << cluster.CoordinatorLog();
    EXPECT_EQ(cluster.GetJob(id).attempt(), 2);
  }
  int named = 0;
  std::cerr << "hang series (seed " << seed << "):\n";
  for (const Outcome& o : outcomes) {
    named += o.named ? 1 : 0;
    std::cerr << "  " << o.what << ": detected after " << o.detect_s << " s, suspect "
              << (o.named ? "right" : "WRONG") << "\n";
  }
  std::cerr << "  right suspect " << named << " of " << outcomes.size() << "\n";
}

}  // namespace
}  // namespace athanor::testing
