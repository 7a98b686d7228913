// `athanor shell` on a real coordinator and a sandboxed agent, driven through
// tmux as a person would: a command's output and exit code come back, typing
// keeps an interactive allocation past its idle timeout (signal "shell"),
// the idle warning shows on the terminal, an idle one is then reclaimed, and
// another tenant is refused. Needs root (sandboxed ranks) and tmux
// (scripts/install-test-tools).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/subprocess.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

constexpr int kIdleTimeoutS = 8;
constexpr int kGraceS = 3;

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Processes on this host running `sleep SECONDS`.
int SleepersOf(const std::string& seconds) {
  const std::string wanted = absl::StrCat("sleep", std::string(1, '\0'), seconds, std::string(1, '\0'));
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    if (!absl::ascii_isdigit(e.path().filename().string()[0])) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += cmdline == wanted;
  }
  return n;
}

// A tmux server of this test's own (its socket name), stopped at the end.
class Tmux {
 public:
  Tmux() : socket_(absl::StrCat("athanor-shell-test-", getpid())) {}
  ~Tmux() { Run({"kill-server"}); }
  // Runs `tmux -L SOCKET args...`; its stdout, or "" on failure.
  std::string Run(const std::vector<std::string>& args, int* exit_code = nullptr) {
    SubprocessOptions o;
    o.argv = {"tmux", "-L", socket_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.capture_stdout = true;
    o.stderr_path = "/dev/null";
    auto p = Subprocess::Start(o);
    if (!p.ok()) return "";
    std::string out = (*p)->ReadAllStdout();
    int rc = (*p)->Wait().exit_code;
    if (exit_code != nullptr) *exit_code = rc;
    return out;
  }
  // A detached 120x40 session running `command` (a sh command line).
  bool Start(const std::string& session, const std::string& command) {
    int rc = -1;
    Run({"new-session", "-d", "-x", "120", "-y", "40", "-s", session, command}, &rc);
    return rc == 0;
  }
  std::string Pane(const std::string& session) { return Run({"capture-pane", "-p", "-J", "-t", session}); }

 private:
  const std::string socket_;
};

class ShellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "shells enter sandboxed ranks: run as root";
    ASSERT_EQ(system("command -v tmux >/dev/null"), 0) << "tmux is missing (scripts/install-test-tools)";
  }

  // The shell command line for tmux: `athanor shell ARGS...` as the tenant
  // whose token is in `token_file`, then its exit code as "EXIT=<n>".
  std::string ShellLine(LocalCluster& cluster, const std::string& token_file, const std::string& args,
                        const std::string& before = "") {
    return absl::StrCat(before, getenv("ATHANOR_BIN_DIR"), "/athanor --coordinator ", cluster.address(), " --ca ",
                        cluster.tls_dir(), "/ca.crt --token-file ", token_file, " shell ", args,
                        "; echo EXIT=$?; sleep 600");
  }

  // Writes `token` to a 0600 file (the CLI refuses others).
  static std::string TokenFile(const std::string& dir, const std::string& name, const std::string& token) {
    std::string path = dir + "/" + name + ".token";
    std::ofstream(path) << token;
    chmod(path.c_str(), 0600);
    return path;
  }
};

TEST_F(ShellTest, CommandsTypingIdleWarningReclaimAndTenants) {
  LocalCluster cluster({"--idle-reclaim-grace-s", absl::StrCat(kGraceS)});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  const std::string token_a = cluster.CreateToken("team-a");
  const std::string token_b = cluster.CreateToken("team-b");
  ASSERT_FALSE(token_a.empty());
  ASSERT_FALSE(token_b.empty());
  const std::string file_a = TokenFile(cluster.dir(), "a", token_a);
  CliResult r = cluster.CliAs(token_a, {"alloc", "--idle-timeout", absl::StrCat(kIdleTimeoutS, "s"), "--", "sleep",
                                        "infinity"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = FirstLine(r.out);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).state() == rpc::JOB_RUNNING; }));
  Tmux tmux;

  // A command's output and exit code.
  ASSERT_TRUE(tmux.Start("print", ShellLine(cluster, file_a, id + " -- python3 -c 'print(6*7)'")));
  std::string pane;
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("print"), "EXIT="); }))
      << pane;
  EXPECT_TRUE(absl::StrContains(pane, "42\n")) << pane;
  EXPECT_TRUE(absl::StrContains(pane, "EXIT=0\n")) << pane;
  ASSERT_TRUE(tmux.Start("seven", ShellLine(cluster, file_a, id + " -- sh -c 'exit 7'")));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("seven"), "EXIT="); }))
      << pane;
  EXPECT_TRUE(absl::StrContains(pane, "EXIT=7\n")) << pane;

  // The command runs in the rank's sandbox: its uid, environment and PID namespace.
  ASSERT_TRUE(tmux.Start("inside", ShellLine(cluster, file_a, id + " -- sh -c 'echo uid=$(id -u) job=$ATHANOR_JOB_ID "
                                                                  "pid1=$(cat /proc/1/comm)'")));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("inside"), "EXIT="); }))
      << pane;
  EXPECT_TRUE(absl::StrContains(pane, absl::StrCat(" job=", id, " pid1=athanor-sandbox\n"))) << pane;
  EXPECT_FALSE(absl::StrContains(pane, "uid=0 ")) << pane;
  EXPECT_TRUE(absl::StrContains(pane, "EXIT=0\n")) << pane;
  // Without a terminal on stdin: pipes, and the command's stdin ends with ours.
  ASSERT_TRUE(tmux.Start("pipes", ShellLine(cluster, file_a, id + " -- cat", "printf 'hello pipes\\n' | ")));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("pipes"), "EXIT="); }))
      << pane;
  EXPECT_TRUE(absl::StrContains(pane, "hello pipes\nEXIT=0\n")) << pane;

  // A client that goes away takes its command with it (SIGHUP to its group).
  ASSERT_TRUE(tmux.Start("gone", ShellLine(cluster, file_a, id + " -- sleep 4242")));
  ASSERT_TRUE(LocalCluster::WaitFor([] { return SleepersOf("4242") == 1; })) << SleepersOf("4242");
  tmux.Run({"kill-session", "-t", "gone"});
  EXPECT_TRUE(LocalCluster::WaitFor([] { return SleepersOf("4242") == 0; })) << SleepersOf("4242");

  // Another tenant is refused, naming the permission.
  r = cluster.CliAs(token_b, {"shell", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "permission denied")) << r.err;

  // An interactive shell: typing keeps the allocation past idle timeout + grace.
  LocalCluster::RearmWatchdog();
  ASSERT_TRUE(tmux.Start("typing", ShellLine(cluster, file_a, id)));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("typing"), "$ "); })) << pane;
  const auto kept_until = std::chrono::steady_clock::now() + std::chrono::seconds(2 * (kIdleTimeoutS + kGraceS));
  while (std::chrono::steady_clock::now() < kept_until) {
    // A key without Enter: the terminal echoes it, nothing in the rank runs
    // (so the shell's input is the only use). tmux offers no event to wait on.
    tmux.Run({"send-keys", "-t", "typing", "x"});
    std::this_thread::sleep_for(std::chrono::seconds(2)); /* sleep override */
    ASSERT_EQ(cluster.GetJob(id).state(), rpc::JOB_RUNNING) << cluster.GetJob(id).reason();
  }
  rpc::Job job = cluster.GetJob(id);
  EXPECT_EQ(job.last_activity().signal(), "shell") << job.DebugString();
  r = cluster.CliAs(token_a, {"job", id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json json = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(json["last_activity"]["signal"], "shell") << r.out;

  // Stop typing: the warning shows on the terminal, then the allocation goes.
  LocalCluster::RearmWatchdog();
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return absl::StrContains(pane = tmux.Pane("typing"), "athanor: idle since "); },
      std::chrono::seconds(kIdleTimeoutS + 10)))
      << pane;
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).state() == rpc::JOB_CANCELLED; },
                                    std::chrono::seconds(kIdleTimeoutS + kGraceS + 10)))
      << cluster.CoordinatorLog();
  EXPECT_TRUE(absl::StartsWith(cluster.GetJob(id).reason(), "reclaimed: idle ")) << cluster.GetJob(id).reason();
  // The shell ends with its rank (the box's end kills it) and says so.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return absl::StrContains(pane = tmux.Pane("typing"), "EXIT="); }))
      << pane;
  // A shell on an ended job is refused.
  r = cluster.CliAs(token_a, {"shell", id, "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "a shell needs a running job")) << r.err;
}

}  // namespace
}  // namespace athanor::testing
