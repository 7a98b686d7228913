// `athanor top` in a real terminal (tmux, 80x24): it shows the running job
// and the queue with the pending job's why, refreshes in place, and quits on
// `q`.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "security/private_file.h"
#include "tests/observability/obs_test_util.h"

namespace athanor::testing {
namespace {

TEST(ObservabilityTopTest, ShowsRunningJobInTmuxAndQuitsOnQ) {
  LocalCluster cluster(OwnMasterPort());
  cluster.EnableHttp();
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 2);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  const std::string running = SubmitLongTraining(cluster, "alice", 1, 2);
  CliResult waiting = cluster.Cli({"submit", "--tenant", "bob", "--nodes", "1", "--gpus-per-node", "1", "--",
                                   "/bin/true"});
  ASSERT_EQ(waiting.exit_code, 0) << waiting.err;
  const std::string pending = waiting.out.substr(0, waiting.out.find('\n'));

  // A tmux server of its own (socket in the cluster's dir), 80x24.
  const std::string socket = cluster.dir() + "/tmux.sock";
  auto tmux = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"tmux", "-S", socket});
    return RunTool(args, cluster.dir() + "/tmux.err");
  };
  // As a user would run it against a secure cluster: the CA to verify the
  // coordinator, and a token file (mode 0600), never a token on the command line.
  const std::string token_file = cluster.dir() + "/top.token";
  ASSERT_TRUE(security::WritePrivateFile(token_file, cluster.admin_token()).ok());
  const std::string top = absl::StrCat(std::getenv("ATHANOR_BIN_DIR"), "/athanor --coordinator ",
                                       cluster.address(), " --ca ", cluster.tls_dir(), "/ca.crt --token-file ",
                                       token_file, " top --interval 0.3");
  CliResult started = tmux({"new-session", "-d", "-s", "top", "-x", "80", "-y", "24", top});
  ASSERT_EQ(started.exit_code, 0) << "tmux (Debian package) is required: " << started.err;
  // The tmux server goes however the test ends (an ASSERT returns early).
  struct KillServer {
    std::function<CliResult(std::vector<std::string>)> tmux;
    ~KillServer() { tmux({"kill-server"}); }
  } kill_server{tmux};

  std::regex job_row(absl::StrCat("(^|\\n)", running, " +alice +RUNNING +2 +\\d+ +\\d+\\.\\d{4} +\\d+\\.\\d{2} "));
  std::string screen;
  bool shown = LocalCluster::WaitFor(
      [&] {
        screen = tmux({"capture-pane", "-p", "-t", "top"}).out;
        return std::regex_search(screen, job_row);
      },
      std::chrono::seconds(45));
  ASSERT_TRUE(shown) << "top never showed job " << running << " running with figures:\n"
                     << screen << "\nathanor job " << running << ":\n"
                     << cluster.Cli({"job", running}).out << "\nrank 0's log tail:\n"
                     << [&] {
                          const std::string log = cluster.Cli({"logs", running, "--rank", "0"}).out;
                          return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
                        }();
  std::ofstream(ArtifactDir() + "/top.txt") << screen;
  std::vector<std::string> lines = absl::StrSplit(screen, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  EXPECT_LE(lines.size(), 24u);
  for (const std::string& l : lines) EXPECT_LE(l.size(), 80u) << l;
  EXPECT_EQ(lines[0].rfind("athanor top", 0), 0u) << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex("node-a +UP +" + running + ":- +" + running + ":-")))
      << screen;
  EXPECT_TRUE(std::regex_search(screen, std::regex(absl::StrCat("\\n", pending, " +bob +1  \\S"))))
      << "pending job and its why missing:\n" << screen;

  ASSERT_EQ(tmux({"send-keys", "-t", "top", "q"}).exit_code, 0);
  // The session ends with the program.
  bool quit = LocalCluster::WaitFor([&] { return tmux({"has-session", "-t", "top"}).exit_code != 0; },
                                    std::chrono::seconds(10));
  EXPECT_TRUE(quit) << "top did not quit on q:\n" << tmux({"capture-pane", "-p", "-t", "top"}).out;
  EXPECT_EQ(cluster.Cli({"cancel", running}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
