// End to end (issue #32, "Image integration test"): a busybox-static root
// filesystem made here becomes a local OCI layout (umoci), is imported with
// `athanor image import`, and jobs run in it on a real coordinator and a
// sandboxed agent with stand-in GPU nodes: a 2-rank job reads the image's
// os-release, its env contract and its GPU nodes; a 2-rank athanor-train
// (a host program the image lacks, run through the host's loader)
// checkpoints through the node checkpoint service; a later job starts without
// fetching again (the agent's image_cache_misses_total unchanged). Then start
// times: submit to the rank's first log line, 10 runs each of a bare start
// (no image), a warm image and a cold one (an agent whose cache holds one
// image, alternating between two), as min/median/max (docs/benchmarks.md).
//
// Needs root (the sandbox), busybox-static and umoci (scripts/install-deps,
// scripts/install-test-tools): as another user the tests skip saying so;
// without the tools they fail.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/subprocess.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string OsRelease(const std::string& id) { return absl::StrCat("ID=", id, "\nNAME=\"athanor ", id, "\"\n"); }

// Runs a tool to completion; its output (stdout and stderr) and exit code.
std::pair<int, std::string> RunTool(const std::vector<std::string>& argv, const std::string& dir) {
  SubprocessOptions o;
  o.argv = argv;
  o.stdout_path = dir + "/tool.out";
  o.stderr_path = "=stdout";
  fs::remove(o.stdout_path);
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  if (!p.ok()) return {-1, std::string(p.status().message())};
  ExitInfo e = (*p)->Wait();
  return {e.exit_code, ReadFile(o.stdout_path)};
}

class ImageE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the sandbox needs root; CI runs this suite as root";
    ASSERT_TRUE(fs::exists("/bin/busybox")) << "install busybox-static (scripts/install-test-tools)";
    ASSERT_EQ(RunTool({"/usr/bin/env", "umoci", "--version"}, cluster_.dir()).first, 0)
        << "install umoci (scripts/install-deps)";
    cluster_.EnableHttp();
    cluster_.StartCoordinator();
    dev_ = cluster_.dir() + "/dev";
    fs::create_directories(dev_);
    // Stand-in GPU nodes (NVIDIA's major 195), as tests/sandbox makes them.
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(mknod(absl::StrCat(dev_, "/nvidia", i).c_str(), S_IFCHR | 0666, makedev(195, i)), 0);
    }
    ASSERT_EQ(mknod((dev_ + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);
    bin_ = std::getenv("ATHANOR_BIN_DIR");
  }

  void StartAgent(const std::vector<std::string>& flags = {}) {
    std::vector<std::string> all = {"--gpu-device-dir", dev_};
    all.insert(all.end(), flags.begin(), flags.end());
    cluster_.StartAgent("node-a", 2, "127.0.0.1", all);
    ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << cluster_.CoordinatorLog() << AgentLog();
  }

  // A busybox rootfs whose os-release names `id`, as an OCI layout, imported as `name`.
  void ImportImage(const std::string& name, const std::string& id) {
    std::string root = cluster_.dir() + "/rootfs-" + name;
    fs::create_directories(root + "/bin");
    fs::create_directories(root + "/etc");
    fs::copy_file("/bin/busybox", root + "/bin/busybox");
    for (const char* applet : {"sh", "cat", "env", "ls", "id"}) fs::create_symlink("busybox", root + "/bin/" + applet);
    std::ofstream(root + "/etc/os-release") << OsRelease(id);
    std::string layout = cluster_.dir() + "/oci-" + name;
    for (const std::vector<std::string>& step :
         {std::vector<std::string>{"umoci", "init", "--layout", layout},
          std::vector<std::string>{"umoci", "new", "--image", layout + ":base"},
          std::vector<std::string>{"umoci", "insert", "--image", layout + ":base", root, "/"}}) {
      std::vector<std::string> argv = {"/usr/bin/env"};
      argv.insert(argv.end(), step.begin(), step.end());
      auto [code, out] = RunTool(argv, cluster_.dir());
      ASSERT_EQ(code, 0) << step[1] << ": " << out;
    }
    CliResult r = cluster_.Cli({"image", "import", name, "oci:" + layout + ":base"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err << cluster_.CoordinatorLog();
  }

  std::string AgentLog() { return ReadFile(cluster_.dir() + "/agent-node-a.log"); }
  std::string Log(const std::string& id, int rank) {
    return ReadFile(absl::StrCat(cluster_.dir(), "/node-a/jobs/", id, "/attempt-1/rank-", rank, ".log"));
  }
  std::string Submit(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
    std::vector<std::string> args = {"submit", "--nodes", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    CliResult r = cluster_.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  void ExpectSucceeds(const std::string& id, int timeout_s = 60) {
    CliResult wait = cluster_.Cli({"wait", id, "--timeout", std::to_string(timeout_s)});
    EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << Log(id, 0) << Log(id, 1) << AgentLog();
  }
  // An agent metric's value (-1 when absent).
  double Metric(const std::string& name) {
    HttpResult r = cluster_.HttpGet(cluster_.agent_metrics_address("node-a"), "/metrics");
    std::smatch m;
    if (r.status != 200 || !std::regex_search(r.body, m, std::regex("\n" + name + "\\{[^}]*\\} ([0-9.e+]+)"))) return -1;
    return std::stod(m[1]);
  }

  LocalCluster cluster_;
  std::string dev_, bin_;
};

TEST_F(ImageE2eTest, JobsRunInTheImageCheckpointAndTheSecondStartsWarm) {
  StartAgent();
  ImportImage("busybox", "athanor-busybox");
  const std::string probe =
      "cat /etc/os-release; echo rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK gpus=$CUDA_VISIBLE_DEVICES; "
      "for i in 0 1; do [ -c /dev/nvidia$i ] && echo nvidia$i=yes || echo nvidia$i=no; done; "
      "touch /x 2>/dev/null && echo root=writable || echo root=read-only";
  std::string a = Submit({"--gpus-per-node", "2", "--image", "busybox"}, {"/bin/sh", "-c", probe});
  ExpectSucceeds(a);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(Log(a, rank), absl::StrCat(OsRelease("athanor-busybox"), "rank=", rank, " world=2 local=", rank,
                                         " gpus=", rank, "\nnvidia0=", rank == 0 ? "yes" : "no", "\nnvidia1=",
                                         rank == 1 ? "yes" : "no", "\nroot=read-only\n"))
        << "rank " << rank;
  }
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Metric("athanor_agent_image_cache_misses_total") == 1; }))
      << AgentLog();

  // athanor-train, a host program (in a --sandbox-shared-dir) the image lacks:
  // through the host's loader, checkpointing through the node's service.
  const std::string store = cluster_.dir() + "/store";
  std::string b = Submit({"--gpus-per-node", "2", "--image", "busybox", "--checkpoint-uri", "file://" + store},
                         {bin_ + "/athanor-train", "--seed", "5", "--hidden", "48", "--optimizer", "sgd", "--lr",
                          "0.05", "--bucket-mb", "0.05", "--first-bucket-mb", "0.01", "--timeout-s", "20",
                          "--steps", "20", "--checkpoint-every", "5"});
  ExpectSucceeds(b, 90);
  // Committed by the coordinator once the node's service uploaded every shard.
  bool committed = LocalCluster::WaitFor([&] { return cluster_.GetJob(b).committed_step() == 20; },
                                         std::chrono::seconds(60));
  EXPECT_TRUE(committed) << "committed step " << cluster_.GetJob(b).committed_step() << "\n" << Log(b, 0) << AgentLog();
  EXPECT_TRUE(fs::exists(absl::StrCat(store, "/", b, "/step-0000000020/COMMIT")));

  // A later job on the node: no fetch, no unpack.
  std::string c = Submit({"--gpus-per-node", "1", "--image", "busybox"}, {"/bin/cat", "/etc/os-release"});
  ExpectSucceeds(c);
  EXPECT_EQ(Log(c, 0), OsRelease("athanor-busybox"));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Metric("athanor_agent_image_cache_hits_total") == 5; }))
      << AgentLog();
  EXPECT_EQ(Metric("athanor_agent_image_cache_misses_total"), 1);
}

// Submit to first log line, in ms.
double StartMs(ImageE2eTest* t, LocalCluster& cluster, const std::vector<std::string>& flags,
               const std::string& marker, std::string* id_out) {
  Clock::time_point start = Clock::now();
  std::vector<std::string> args = {"submit", "--nodes", "1", "--gpus-per-node", "1"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--", "/bin/sh", "-c", "echo " + marker});
  CliResult r = cluster.Cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  std::string log = absl::StrCat(cluster.dir(), "/node-a/jobs/", id, "/attempt-1/rank-0.log");
  Clock::time_point deadline = start + std::chrono::seconds(30);
  // The rank is another process: its first line is polled for (2 ms steps).
  while (ReadFile(log).find(marker) == std::string::npos && Clock::now() < deadline) {
    // Polling another process's log file (its first line is the start time measured), with a deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); /* sleep override */
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_NE(ReadFile(log).find(marker), std::string::npos) << "no first line within 30 s";
  *id_out = id;
  return ms;
}

TEST_F(ImageE2eTest, ColdAndWarmStartTimesAgainstABareStart) {
  // The cache holds one image: a run in the other image is a cold start
  // (fetch, check, unpack), and a run right after it in the same one warm.
  StartAgent({"--image-cache-bytes", "3000000"});  // one ~2 MB image fits, not two
  ImportImage("one", "one");
  ImportImage("two", "two");
  std::map<std::string, std::vector<double>> times;
  std::string id;
  const int kRuns = 10;
  for (int i = 0; i < kRuns; ++i) {
    LocalCluster::RearmWatchdog();
    const std::string image = i % 2 == 0 ? "one" : "two";
    times["bare"].push_back(StartMs(this, cluster_, {}, "started", &id));
    ExpectSucceeds(id);
    times["cold"].push_back(StartMs(this, cluster_, {"--image", image}, "started", &id));
    ExpectSucceeds(id);
    times["warm"].push_back(StartMs(this, cluster_, {"--image", image}, "started", &id));
    ExpectSucceeds(id);
  }
  // Every cold run fetched; no warm one did.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Metric("athanor_agent_image_cache_hits_total") == 2 * kRuns; }))
      << AgentLog();
  EXPECT_EQ(Metric("athanor_agent_image_cache_misses_total"), kRuns);
  std::cout << "\nstart: submit to the rank's first log line, " << kRuns << " runs each (ms)\n"
            << absl::StrFormat("%-6s %9s %9s %9s\n", "start", "min", "median", "max");
  for (const char* kind : {"bare", "warm", "cold"}) {
    std::vector<double>& v = times[kind];
    std::sort(v.begin(), v.end());
    std::cout << absl::StrFormat("%-6s %9.1f %9.1f %9.1f\n", kind, v.front(), (v[4] + v[5]) / 2, v.back());
  }
  std::cout << "image: a busybox-static rootfs of " << fs::file_size("/bin/busybox") << " bytes\n";
}

}  // namespace
}  // namespace athanor::testing
