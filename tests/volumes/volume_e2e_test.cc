// Volumes end to end (issue #32, "Volume integration test"), on a secure
// local cluster (tests/cluster_harness.h: a coordinator and two sandboxed
// agents, every process under the harness's watchdog):
//   1. a file that job 1 of tenant a writes into its volume on node-1 is read,
//      exactly, by a's next job, placed on node-2;
//   2. tenant b neither lists the volume nor mounts it (the submission is
//      refused as for a volume that does not exist);
//   3. a second read-write mount while a job that mounts it read-write runs
//      is refused, naming that job;
//   4. after a kill -9 of the agent running a job that has written into the
//      volume, the volume holds its last synced content, exactly;
//   5. a preempted job's next attempt reads what the first wrote.
// Nodes are chosen by draining the other. Root only (the sandbox binds the
// volumes); CI runs it as root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

class VolumeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "volumes are bound by the sandbox, which needs root; CI runs this as root";
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-1", 1, "127.0.0.1");
    cluster_.StartAgent("node-2", 1, "127.0.0.2");
    ASSERT_TRUE(cluster_.WaitForNodesUp(2)) << cluster_.CoordinatorLog();
    a_ = cluster_.CreateToken("tenant-a");
    b_ = cluster_.CreateToken("tenant-b");
  }
  // Only `node` takes new work.
  void OnlyOn(const std::string& node) {
    for (const char* n : {"node-1", "node-2"}) {
      CliResult r = cluster_.Cli({n == node ? "undrain" : "drain", n});
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
  std::string Submit(const std::string& token, const std::string& volume, const std::string& script) {
    CliResult r = cluster_.CliAs(token, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--volume", volume, "--",
                                         "sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << cluster_.CoordinatorLog();
    return r.out.substr(0, r.out.find('\n'));
  }
  void WaitSucceeded(const std::string& id) {
    CliResult w = cluster_.CliAs(a_, {"wait", id, "--timeout", "60"});
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err << cluster_.CoordinatorLog();
  }
  // Tenant a's volume "data" as `volume ls --json` shows it.
  nlohmann::json Volume() {
    CliResult r = cluster_.CliAs(a_, {"volume", "ls", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("volumes")) return nlohmann::json::object();
    for (const nlohmann::json& v : j["volumes"]) {
      if (v.value("name", "") == "data") return v;
    }
    return nlohmann::json::object();
  }
  int64_t Generation() {
    nlohmann::json v = Volume();
    return v.contains("generation") ? std::stoll(v["generation"].get<std::string>()) : 0;
  }
  std::string Logs(const std::string& id) {
    CliResult r = cluster_.CliAs(a_, {"logs", id});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  LocalCluster cluster_;
  std::string a_, b_;
};

TEST_F(VolumeE2eTest, FollowsTheTenantAcrossNodesAndSurvivesAKilledAgent) {
  CliResult made = cluster_.CliAs(a_, {"volume", "create", "data", "--size", "16M"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.out, "created tenant-a/data: 16 MiB, 0 B used, generation 0\n");
  // The tenant's quota, from its policy (the priority cap it had stays).
  CliResult policy = cluster_.Cli({"admin", "tenant", "set", "tenant-a", "--max-priority", "3"});
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  policy = cluster_.Cli({"admin", "tenant", "set", "tenant-a", "--max-volumes", "1", "--max-volume-bytes", "1G"});
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  EXPECT_EQ(policy.out, "tenant-a  max priority 3  volumes 1 GiB, 1 at most\n");
  CliResult over = cluster_.CliAs(a_, {"volume", "create", "more", "--size", "1M"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.err.find("tenant tenant-a holds 1 volumes; its quota is 1"), std::string::npos) << over.err;

  // 1. Written on node-1, read on node-2.
  OnlyOn("node-1");
  const std::string writer = Submit(a_, "data:/mnt", "mkdir -p /mnt/d && printf 'hello from node-1\\n' > /mnt/d/f.txt");
  WaitSucceeded(writer);
  EXPECT_EQ(cluster_.GetJob(writer).allocation(0).node(), "node-1");
  // The agent syncs up once the job's box ended: the generation moves.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Generation() >= 1; })) << Volume().dump() << cluster_.CoordinatorLog();
  const int64_t synced = Generation();
  LocalCluster::RearmWatchdog();
  OnlyOn("node-2");
  const std::string reader = Submit(a_, "data:/mnt:ro", "cat /mnt/d/f.txt");
  WaitSucceeded(reader);
  EXPECT_EQ(cluster_.GetJob(reader).allocation(0).node(), "node-2");
  EXPECT_EQ(Logs(reader), "[rank 0] hello from node-1\n");
  EXPECT_EQ(Generation(), synced);  // a read-only mount never stores

  // 2. Another tenant: not listed, not mountable (as if it did not exist).
  CliResult listed = cluster_.CliAs(b_, {"volume", "ls", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.out.find("data"), std::string::npos) << listed.out;
  CliResult theirs = cluster_.CliAs(b_, {"volume", "ls", "--tenant", "tenant-a"});
  EXPECT_EQ(theirs.exit_code, 1) << theirs.out;
  CliResult mount = cluster_.CliAs(b_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--volume", "data:/mnt:ro",
                                        "--", "cat", "/mnt/d/f.txt"});
  EXPECT_EQ(mount.exit_code, 1) << mount.out;
  EXPECT_NE(mount.err.find("spec.volumes: tenant tenant-b has no volume 'data'"), std::string::npos) << mount.err;

  // 3. One writer at a time: this one writes, then waits to be killed.
  LocalCluster::RearmWatchdog();
  const std::string holder = Submit(a_, "data:/mnt", "printf 'never synced\\n' > /mnt/d/f.txt; touch /mnt/new; exec sleep 600");
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(holder).state() == rpc::JOB_RUNNING; }))
      << cluster_.CoordinatorLog();
  CliResult second = cluster_.CliAs(a_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--volume", "data:/x",
                                         "--", "true"});
  EXPECT_EQ(second.exit_code, 1) << second.out;
  EXPECT_NE(second.err.find("spec.volumes: volume 'data' is mounted read-write by job " + holder +
                            " (queued or running); a volume has one writer at a time"),
            std::string::npos)
      << second.err;
  // The holder has written (its rank log is there once the shell ran).
  const std::string copy = cluster_.dir() + "/node-2/jobs/" + holder + "/attempt-1/volumes/data/new";
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return access(copy.c_str(), F_OK) == 0; }))
      << "the holder never wrote into its copy";

  // 4. kill -9 of its agent: nothing is synced; the volume is as it was. The
  // holder is cancelled (so that it is never requeued), and holds node-2's
  // GPU until that node is DOWN: the check runs on node-1.
  LocalCluster::RearmWatchdog();
  cluster_.KillAgent("node-2");
  ASSERT_EQ(cluster_.CliAs(a_, {"cancel", holder}).exit_code, 0);
  ASSERT_EQ(cluster_.Cli({"undrain", "node-1"}).exit_code, 0);
  const std::string check = Submit(a_, "data:/mnt:ro", "cat /mnt/d/f.txt; ls /mnt");
  WaitSucceeded(check);
  EXPECT_EQ(cluster_.GetJob(check).allocation(0).node(), "node-1");
  EXPECT_EQ(Logs(check), "[rank 0] hello from node-1\n[rank 0] d\n");
  EXPECT_EQ(Generation(), synced);
  // node-2 again: its agent ends what the killed one left (the holder's box)
  // and, the holder's attempt being over, stores nothing of its copy.
  cluster_.StartAgent("node-2", 1, "127.0.0.2");
  ASSERT_TRUE(cluster_.WaitForNodesUp(2)) << cluster_.CoordinatorLog();
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(holder).state() == rpc::JOB_CANCELLED; }))
      << cluster_.CoordinatorLog();
  EXPECT_EQ(Generation(), synced);
}

// 5. A preempted job's writes reach its next attempt: the coordinator does
// not place that attempt until the first one's copy is stored back (or
// reported unchanged), so it never starts from the older generation.
TEST_F(VolumeE2eTest, APreemptedJobsWritesReachItsNextAttempt) {
  CliResult made = cluster_.CliAs(a_, {"volume", "create", "data", "--size", "16M"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // Attempt 1 writes and waits to be preempted; attempt 2 reads, appends, ends.
  const std::string job = Submit(a_, "data:/mnt",
                                 "if [ -f /mnt/f ]; then cat /mnt/f; echo second >> /mnt/f; "
                                 "else echo first > /mnt/f; exec sleep 600; fi");
  const std::string copy = cluster_.dir() + "/" + "node-1/jobs/" + job + "/attempt-1/volumes/data/f";
  const std::string copy2 = cluster_.dir() + "/" + "node-2/jobs/" + job + "/attempt-1/volumes/data/f";
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return access(copy.c_str(), F_OK) == 0 || access(copy2.c_str(), F_OK) == 0; }))
      << "attempt 1 never wrote into its copy" << cluster_.CoordinatorLog();
  CliResult p = cluster_.Cli({"preempt", job, "--grace", "5s"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  LocalCluster::RearmWatchdog();
  WaitSucceeded(job);
  EXPECT_EQ(cluster_.GetJob(job).attempt(), 2);
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Generation() >= 2; })) << Volume().dump() << cluster_.CoordinatorLog();
  EXPECT_EQ(Generation(), 2);  // attempt 1's store, then attempt 2's: none refused
  const std::string reader = Submit(a_, "data:/mnt:ro", "cat /mnt/f");
  WaitSucceeded(reader);
  EXPECT_EQ(Logs(reader), "[rank 0] first\n[rank 0] second\n");
}

}  // namespace
}  // namespace athanor::testing
