// Instance snapshots end to end (docs/operations.md, "Snapshots"), on a
// secure local cluster (tests/cluster_harness.h: a coordinator and a
// sandboxed agent, every process under the harness's watchdog):
//   1. an allocation writes a file into its work dir and one into its
//      read-write volume, goes idle and is reclaimed; `athanor snapshots
//      --json` shows one complete snapshot of it;
//   2. another tenant neither lists nor restores it;
//   3. `athanor alloc --restore ID` starts an instance whose rank finds both
//      files, exactly, within 30 s of the submission;
//   4. so does `athanor alloc --resume JOB`.
// Root only (the sandbox binds the volume); CI runs it as root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

class SnapshotRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "volumes are bound by the sandbox, which needs root; CI runs this as root";
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-1", 1, "127.0.0.1");
    ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << cluster_.CoordinatorLog();
    a_ = cluster_.CreateToken("tenant-a");
    b_ = cluster_.CreateToken("tenant-b");
  }
  std::string Alloc(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"alloc"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = cluster_.CliAs(a_, args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << cluster_.CoordinatorLog();
    return r.out.substr(0, r.out.find('\n'));
  }
  nlohmann::json Snapshots(const std::string& token) {
    CliResult r = cluster_.CliAs(token, {"snapshots", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("snapshots")) return nlohmann::json::array();
    return j["snapshots"];
  }
  std::string Logs(const std::string& id) { return cluster_.CliAs(a_, {"logs", id}).out; }
  // Submits with `flags` and waits until the rank has printed both files;
  // the time that took, in ms (-1 when it did not within 30 s).
  int64_t RestoreAndRead(const std::vector<std::string>& flags, std::string* job) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> args = flags;
    for (const char* a : {"--idle-timeout", "1h", "--", "sh", "-c", "cat notes.txt /mnt/v.txt; exec sleep 600"}) {
      args.push_back(a);
    }
    *job = Alloc(args);
    const std::string want = "[rank 0] in the work dir\n[rank 0] in the volume\n";
    if (!LocalCluster::WaitFor([&] { return Logs(*job) == want; }, std::chrono::seconds(30))) return -1;
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  }
  void CancelAndWait(const std::string& job) {
    ASSERT_EQ(cluster_.CliAs(a_, {"cancel", job}).exit_code, 0);
    ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(job).state() == rpc::JOB_CANCELLED; }))
        << cluster_.CoordinatorLog();
  }

  LocalCluster cluster_{{"--idle-reclaim-grace-s", "1"}};
  std::string a_, b_;
};

TEST_F(SnapshotRestoreTest, AReclaimedInstanceIsRestoredWithItsWorkDirAndVolume) {
  CliResult made = cluster_.CliAs(a_, {"volume", "create", "data", "--size", "16M"});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  // 1. Writes, then idles until reclaimed.
  const std::string job = Alloc({"--idle-timeout", "3s", "--volume", "data:/mnt", "--", "sh", "-c",
                                 "printf 'in the work dir\\n' > notes.txt; printf 'in the volume\\n' > /mnt/v.txt; "
                                 "exec sleep 600"});
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(job).state() == rpc::JOB_CANCELLED; },
                                    std::chrono::seconds(60)))
      << cluster_.CoordinatorLog();
  EXPECT_EQ(cluster_.GetJob(job).reason().rfind("reclaimed: idle for ", 0), 0u) << cluster_.GetJob(job).reason();
  const std::string id = "snap-" + job + "-1";
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    nlohmann::json s = Snapshots(a_);
    return s.size() == 1 && s[0].value("complete", false);
  })) << Snapshots(a_).dump() << cluster_.CoordinatorLog();
  nlohmann::json snap = Snapshots(a_)[0];
  EXPECT_EQ(snap.value("id", ""), id);
  EXPECT_EQ(snap.value("tenant", ""), "tenant-a");
  EXPECT_EQ(snap.value("job_id", ""), job);
  ASSERT_EQ(snap["workdir_keys"].size(), 1u);
  EXPECT_EQ(snap["workdir_keys"][0], "snapshots/tenant-a/" + id + "/rank-0.tar");
  ASSERT_EQ(snap["volumes"].size(), 1u);
  EXPECT_EQ(snap["volumes"][0].value("volume", ""), "data");
  EXPECT_EQ(snap["volumes"][0].value("path", ""), "/mnt");
  EXPECT_EQ(snap["volumes"][0].value("snapshot", ""), id);

  // 2. Another tenant's view: none listed, none restorable.
  EXPECT_EQ(Snapshots(b_).size(), 0u);
  CliResult theirs = cluster_.CliAs(b_, {"alloc", "--restore", id, "--idle-timeout", "1h"});
  EXPECT_EQ(theirs.exit_code, 2) << theirs.out;
  EXPECT_NE(theirs.err.find("no snapshot '" + id + "'"), std::string::npos) << theirs.err;
  CliResult forced = cluster_.CliAs(b_, {"snapshots", "rm", id});
  EXPECT_EQ(forced.exit_code, 1) << forced.out;

  // 3. --restore.
  LocalCluster::RearmWatchdog();
  std::string restored;
  const int64_t ms = RestoreAndRead({"--restore", id}, &restored);
  ASSERT_GE(ms, 0) << Logs(restored) << cluster_.CoordinatorLog();
  std::cout << "restore: both files visible " << ms << " ms after the submission\n";
  EXPECT_LT(ms, 30000);
  CancelAndWait(restored);

  // 4. --resume: the job's newest complete snapshot (the same one).
  LocalCluster::RearmWatchdog();
  std::string resumed;
  const int64_t ms2 = RestoreAndRead({"--resume", job}, &resumed);
  ASSERT_GE(ms2, 0) << Logs(resumed) << cluster_.CoordinatorLog();
  std::cout << "resume: both files visible " << ms2 << " ms after the submission\n";
  EXPECT_EQ(cluster_.GetJob(resumed).spec().restore_snapshot(), id);
  CancelAndWait(resumed);

  // A user's cancel leaves no snapshot; rm removes one, with its blob in the
  // data store (file://<the --state folder>/data).
  EXPECT_EQ(Snapshots(a_).size(), 1u);
  const std::string blob = cluster_.dir() + "/data/snapshots/tenant-a/" + id + "/rank-0.tar";
  EXPECT_EQ(access(blob.c_str(), F_OK), 0) << blob;
  CliResult rm = cluster_.CliAs(a_, {"snapshots", "rm", id});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(rm.out, "removed " + id + "\n");
  EXPECT_EQ(Snapshots(a_).size(), 0u);
  EXPECT_NE(access(blob.c_str(), F_OK), 0) << blob;
}

}  // namespace
}  // namespace athanor::testing
