// Idleness of notebook instances (docs/operations.md, "Interactive
// instances"), on a secure local cluster with the notebook proxy
// (tests/cluster_harness.h; every process under the harness's watchdog).
// CPU, network and disk thresholds are raised out of reach, so the kernel is
// the only signal that can count:
//   1. instance A: a cell started through the proxy keeps its kernel busy
//      while sleeping (no CPU), and its WebSocket is closed (no browser
//      attached): A is still RUNNING after 2 x (idle timeout + grace), and
//      its last use is the kernel's (the cell starts once the notebook
//      server has seen the kernel idle: its state comes from its own iopub
//      subscription; a kernel it never sees is replaced, at most twice);
//   2. instance B, left without a kernel, is warned: the dashboard's overview
//      shows its idle banner (Chromium over the DevTools protocol reads the
//      DOM and screenshots it into the artefacts folder), then B is reclaimed.
// Root only (the sandbox); CI runs it as root with jupyter-notebook and
// chromium installed (scripts/install-test-tools): missing ones fail it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

constexpr int kBusyTimeoutS = 12;  // A's: room for its notebook server to start before its kernel counts
constexpr int kIdleTimeoutS = 6;   // B's
constexpr int kGraceS = 5;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ArtifactDir() {
  const char* env = std::getenv("ATHANOR_ARTIFACT_DIR");
  std::string dir = env != nullptr && *env != '\0'
                        ? std::string(env)
                        : std::string(std::getenv("ATHANOR_BIN_DIR")) + "/../tests/artifacts/interactive";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

class NotebookIdleTest : public ::testing::Test {
 protected:
  NotebookIdleTest()
      : port_(PickUnusedPort()),
        cluster_({"--notebook-listen", "127.0.0.1:" + std::to_string(port_), "--idle-reclaim-grace-s",
                  absl::StrCat(kGraceS), "--idle-cpu-fraction", "1000", "--idle-net-bytes-per-s", "1000000000000",
                  "--idle-disk-bytes-per-s", "1000000000000"}) {}
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "notebooks run in the sandbox, which needs root; CI runs this as root";
    cluster_.EnableHttp();
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-1", 2, "127.0.0.1");
    ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << cluster_.CoordinatorLog();
    a_ = cluster_.CreateToken("tenant-a");
  }

  // A failure leaves the daemons' logs with the artefacts.
  void TearDown() override {
    if (!HasFailure()) return;
    for (const char* log : {"coordinator.log", "agent-node-1.log", "drive.err", "watch.err"}) {
      std::error_code ec;
      std::filesystem::copy_file(cluster_.dir() + "/" + log, ArtifactDir() + "/notebook_idle." + log,
                                 std::filesystem::copy_options::overwrite_existing, ec);
    }
    for (const char* id : {"1", "2"}) {  // the ranks' output: the notebook servers' logs
      std::ofstream(ArtifactDir() + "/notebook_idle.job-" + std::string(id) + ".log") << cluster_.CliAs(a_, {"logs", id}).out;
    }
  }

  // notebook_drive.py with `args` after the common ones (Debian's python3).
  std::vector<std::string> Drive(const std::string& job, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     std::string(std::getenv("ATHANOR_SOURCE_DIR")) +
                                         "/tests/interactive/notebook_drive.py",
                                     "--port", std::to_string(port_), "--ca", cluster_.tls_dir() + "/ca.crt",
                                     "--job", job, "--token", a_};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  const int port_;
  LocalCluster cluster_;
  std::string a_;
};

TEST_F(NotebookIdleTest, ABusyKernelKeepsItsInstanceAnIdleOneIsWarnedThenReclaimed) {
  ASSERT_EQ(access("/usr/bin/jupyter-notebook", X_OK), 0) << "jupyter-notebook (Debian package) is required";
  CliResult idle = cluster_.CliAs(a_, {"alloc", "--notebook", "--idle-timeout", absl::StrCat(kIdleTimeoutS, "s")});
  ASSERT_EQ(idle.exit_code, 0) << idle.out << idle.err << cluster_.CoordinatorLog();
  const std::string idle_id = FirstLine(idle.out);

  // The dashboard's overview, watched by Chromium until B's banner shows.
  const std::string shot = ArtifactDir() + "/dashboard_idle_warning.png";
  std::filesystem::remove(shot);
  SubprocessOptions watch;
  watch.argv = Drive(idle_id, {"--dashboard", cluster_.http_base() + "/#token=" + a_, "--banner-job", idle_id,
                               "--screenshot", shot, "--wait-s", "40", "--chromium-dir",
                               cluster_.dir() + "/chromium-dash"});
  watch.capture_stdout = true;
  watch.stderr_path = cluster_.dir() + "/watch.err";
  auto watcher = Subprocess::Start(watch);
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  bool watcher_done = false;
  absl::Cleanup stop_watcher = [&] {
    if (!watcher_done) (void)(*watcher)->Signal(SIGKILL);
  };

  // 1. A: a cell that sleeps, started through the proxy; its WebSocket closes once the kernel is busy.
  CliResult busy = cluster_.CliAs(a_, {"alloc", "--notebook", "--idle-timeout", absl::StrCat(kBusyTimeoutS, "s")});
  ASSERT_EQ(busy.exit_code, 0) << busy.out << busy.err;
  const std::string busy_id = FirstLine(busy.out);
  int code = 0;
  SubprocessOptions drive;
  // The cell's code keeps the kernel busy: /* sleep override */ it is the workload, not a wait of the test.
  drive.argv = Drive(busy_id, {"--leave-busy", "--code", "import time; time.sleep(90)"});  /* sleep override */
  drive.capture_stdout = true;
  drive.stderr_path = cluster_.dir() + "/drive.err";
  auto driver = Subprocess::Start(drive);
  ASSERT_TRUE(driver.ok()) << driver.status();
  std::string out = (*driver)->ReadAllStdout();
  code = (*driver)->Wait().exit_code;
  ASSERT_EQ(code, 0) << out << ReadAll(cluster_.dir() + "/drive.err") << cluster_.CoordinatorLog();
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out;
  EXPECT_EQ(r["kernel_status"], 201);
  EXPECT_EQ(r["cell_status"], "busy");
  EXPECT_EQ(r["kernels_after"], nlohmann::json({"busy"}));
  std::cout << "notebook A reachable " << r["reachable_after_s"] << " s after the first try; kernels started: "
            << r["kernel_tries"] << "\n";

  // No browser attached: A outlives 2 x (timeout + grace). Only the
  // coordinator's view can be watched, so it is read every second.
  LocalCluster::RearmWatchdog();
  const auto kept_until = std::chrono::steady_clock::now() + std::chrono::seconds(2 * (kBusyTimeoutS + kGraceS));
  while (std::chrono::steady_clock::now() < kept_until) {
    rpc::Job j = cluster_.GetJob(busy_id);
    ASSERT_EQ(j.state(), rpc::JOB_RUNNING) << j.reason() << "\n" << cluster_.CoordinatorLog();
    std::this_thread::sleep_for(std::chrono::seconds(1)); /* sleep override */
  }
  CliResult shown = cluster_.CliAs(a_, {"job", busy_id, "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  nlohmann::json json = nlohmann::json::parse(shown.out, nullptr, false);
  EXPECT_EQ(json["last_activity"]["signal"], "kernel") << shown.out;
  EXPECT_EQ(json["last_activity"]["detail"], "1 kernel busy") << shown.out;
  EXPECT_EQ(json["state"], "JOB_RUNNING") << shown.out;

  // 2. B was warned (the banner, seen by the watcher) and then reclaimed.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(idle_id).state() == rpc::JOB_CANCELLED; },
                                    std::chrono::seconds(kIdleTimeoutS + kGraceS + 10)))
      << cluster_.GetJob(idle_id).DebugString() << cluster_.CoordinatorLog();
  EXPECT_TRUE(absl::StartsWith(cluster_.GetJob(idle_id).reason(), "reclaimed: idle "))
      << cluster_.GetJob(idle_id).reason();
  std::string seen = (*watcher)->ReadAllStdout();
  code = (*watcher)->Wait().exit_code;
  watcher_done = true;
  ASSERT_EQ(code, 0) << seen << ReadAll(cluster_.dir() + "/watch.err");
  nlohmann::json w = nlohmann::json::parse(seen, nullptr, false);
  ASSERT_FALSE(w.is_discarded()) << seen;
  EXPECT_TRUE(absl::StartsWith(w.value("banner_text", ""), "instance " + idle_id + ": idle since ")) << seen;
  EXPECT_TRUE(absl::StrContains(w.value("banner_text", ""), "unless used (athanor alloc --keep " + idle_id + ")"))
      << seen;
  EXPECT_EQ(w["dom_has_banner"], true) << seen;
  EXPECT_GT(std::filesystem::file_size(shot), 10000u) << "the screenshot is nearly empty";
  std::cout << "idle banner after " << w["banner_after_s"] << " s; screenshot " << shot << "\n";
  ASSERT_EQ(cluster_.CliAs(a_, {"cancel", busy_id}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
