// Integration tests of idleness and out-of-memory advice on a real
// coordinator and sandboxed agents: an instance that downloads (with little
// CPU) is kept by its network traffic, a truly idle one is reclaimed within
// idle timeout + grace, `athanor alloc --keep` withdraws a warning, and a
// rank killed by its cgroup's OOM killer ends with a reason that says so and
// what to try (with the micro-batch and accumulation for athanor-train).
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

constexpr int kIdleTimeoutS = 3;
constexpr int kGraceS = 2;

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

TEST(IdleTest, DownloadIsKeptByItsNetworkIdleOneIsReclaimed) {
  // CPU alone would need half a core: what keeps the download is its traffic.
  LocalCluster cluster({"--idle-reclaim-grace-s", absl::StrCat(kGraceS), "--idle-cpu-fraction", "0.5"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  // A local HTTP server with a large (sparse) file.
  const std::string www = cluster.dir() + "/www";
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", www, " && truncate -s 256M ", www, "/blob").c_str()), 0);
  const int port = PickFreePort().value();
  SubprocessOptions so;
  so.argv = {"python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", www,
             absl::StrCat(port)};
  so.stdout_path = cluster.dir() + "/http.log";
  so.stderr_path = "=stdout";
  auto server = Subprocess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  cluster.TrackHelper(server->get());
  // A bounded download loop, as a model download reads: one connection, 64
  // KiB every 20 ms (about 3 MB/s, little CPU), for at most a minute.
  const std::string loop = absl::StrCat(
      "import time, urllib.request\n"
      "end = time.time() + 60\n"
      "while time.time() < end:\n"
      "    try:\n"
      "        with urllib.request.urlopen('http://127.0.0.1:", port, "/blob', timeout=5) as r:\n"
      "            while time.time() < end and r.read(65536):\n"
      "                time.sleep(0.02)\n"  /* sleep override: the rank's paced download, not a wait of the test */
      "    except OSError:\n"
      "        time.sleep(0.2)\n");  /* sleep override: the rank's retry pause, not a wait of the test */
  CliResult r = cluster.Cli({"alloc", "--idle-timeout", absl::StrCat(kIdleTimeoutS, "s"), "--",
                             "python3", "-c", loop});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string download = FirstLine(r.out);
  r = cluster.Cli({"alloc", "--idle-timeout", absl::StrCat(kIdleTimeoutS, "s"), "--", "sleep", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string idle = FirstLine(r.out);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(download).state() == rpc::JOB_RUNNING; }));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.GetJob(idle).state() == rpc::JOB_CANCELLED; }, std::chrono::seconds(30)))
      << cluster.CoordinatorLog();
  // Reclaimed within idle timeout + grace, plus a heartbeat and a tick, by
  // the coordinator's own clock.
  rpc::Job job = cluster.GetJob(idle);
  int idle_s = -1;
  ASSERT_EQ(std::sscanf(job.reason().c_str(), "reclaimed: idle for %d s", &idle_s), 1) << job.reason();
  EXPECT_GE(idle_s, kIdleTimeoutS + kGraceS) << job.reason();
  EXPECT_LE(idle_s, kIdleTimeoutS + kGraceS + 2) << job.reason();
  // The download outlives its own idle timeout + grace with room to spare
  // (the coordinator's clock, in Unix seconds, is the machine's).
  rpc::Job dl;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        dl = cluster.GetJob(download);
        return dl.state() != rpc::JOB_RUNNING ||
               std::time(nullptr) - dl.start_time_unix() >= 2 * (kIdleTimeoutS + kGraceS);
      },
      std::chrono::seconds(30)));
  EXPECT_EQ(dl.state(), rpc::JOB_RUNNING) << dl.reason();
  EXPECT_EQ(dl.last_activity().signal(), "network") << dl.DebugString();
  EXPECT_TRUE(absl::EndsWith(dl.last_activity().detail(), "B/s")) << dl.last_activity().detail();
  EXPECT_GT(dl.reclaim_at_unix(), dl.last_activity().at_unix());
  r = cluster.Cli({"job", download});
  EXPECT_NE(r.out.find("last activity:  network ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reclaim:        "), std::string::npos) << r.out;
  EXPECT_EQ(cluster.Cli({"cancel", download}).exit_code, 0);
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(download).state() == rpc::JOB_CANCELLED; }));
}

TEST(IdleTest, KeepWithdrawsTheWarning) {
  LocalCluster cluster({"--idle-reclaim-grace-s", "30"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  CliResult r = cluster.Cli({"alloc", "--idle-timeout", "2s", "--", "sleep", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = FirstLine(r.out);
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return absl::StartsWith(cluster.GetJob(id).reason(), "idle since "); }))
      << cluster.GetJob(id).reason();
  rpc::Job warned = cluster.GetJob(id);
  EXPECT_TRUE(absl::StrContains(warned.reason(), "; reclaim in 30 s, at ")) << warned.reason();
  r = cluster.Cli({"alloc", "--keep", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, absl::StrCat("kept ", id, ": reclaimed if idle until "))) << r.out;
  rpc::Job kept = cluster.GetJob(id);
  EXPECT_EQ(kept.state(), rpc::JOB_RUNNING);
  EXPECT_EQ(kept.reason(), "");
  EXPECT_EQ(kept.last_activity().signal(), "keep");
  EXPECT_EQ(kept.reclaim_at_unix(), kept.last_activity().at_unix() + 2 + 30);
  EXPECT_EQ(cluster.Cli({"cancel", id}).exit_code, 0);
}

TEST(IdleTest, OutOfMemoryEndsWithAdvice) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  if (!cluster.sandboxed()) GTEST_SKIP() << "needs root: the memory limit is the sandbox's cgroup";
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  // A program of its own: the general advice.
  CliResult r = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "1", "--memory-per-node", "64M",
                             "--", "python3", "-c", "b = b'x' * (512 << 20)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string py = FirstLine(r.out);
  // athanor-train with weights and optimiser state far past 64 MiB (4096 x 4096 x 4 B per layer).
  r = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "1", "--memory-per-node", "64M", "--",
                   std::string(std::getenv("ATHANOR_BIN_DIR")) + "/athanor-train", "--hidden", "4096",
                   "--layers", "2", "--steps", "2", "--micro-batch", "32", "--accum", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string train = FirstLine(r.out);
  for (const std::string& id : {py, train}) {
    ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(id).state() == rpc::JOB_FAILED; },
                                      std::chrono::seconds(60)))
        << id << ": " << cluster.GetJob(id).reason();
  }
  rpc::Job job = cluster.GetJob(py);
  EXPECT_EQ(job.reason(), absl::StrCat("rank 0 on node node-a was killed by signal 9 (exit code 137): "
                                       "out of memory; ", job.advice()));
  EXPECT_EQ(job.advice(),
            "try a smaller micro-batch with more gradient accumulation steps for the same global batch; "
            "bf16 instead of fp32; activation checkpointing where the framework has it (e.g. "
            "torch.utils.checkpoint); for inference, 8-bit or 4-bit quantisation; or more memory per "
            "node (--memory-per-node)");
  job = cluster.GetJob(train);
  EXPECT_EQ(job.advice(),
            "try a smaller micro-batch with more accumulation steps for the same global batch: "
            "--micro-batch 16 --accum 2 (was --micro-batch 32 --accum 1); --precision bf16; for "
            "inference, 8-bit or 4-bit quantisation; or more memory per node (--memory-per-node)");
  EXPECT_TRUE(absl::EndsWith(job.reason(), "out of memory; " + job.advice())) << job.reason();
  r = cluster.Cli({"job", train});
  EXPECT_NE(r.out.find("advice:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--micro-batch 16 --accum 2"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace athanor::testing
