// The node agent's findings of an outside attack, each replayed on a real
// sandboxed agent (worker/agent/sandbox.h; docs/security.md):
//
// 1. A job's environment reached athanor-sandbox-exec, which runs as root in
//    the host's namespaces: `--env LD_PRELOAD=evil.so` ran the library's
//    constructor as uid 0. Now the helper starts with the agent's
//    environment and applies the job's only in the rank's execve.
// 2. Agents stopped with kill -9 left their cgroups behind, and a later
//    sandbox could depend on them. Now a restarted agent ends and removes
//    everything a killed agent made, even when it restarts in another cgroup.
// 3. A link planted in a file:// checkpoint root (below).
// 4. Rank logs were opened by path, as root, following links: a link planted
//    in place of a log made the agent append a rank's output to whatever it
//    named, and `athanor logs` read it back (another tenant's log, the
//    node's TLS key). Now logs are reached from the work dir with openat and
//    O_NOFOLLOW (worker/agent/rank_log.h).
//
// Needs root, as CI runs it (the agent sandboxes only as root).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/cluster_harness.h"
#include "worker/agent/cgroups.h"
#include "worker/agent/orphans.h"

namespace athanor::testing {
namespace {

namespace fs = std::filesystem;

// "controller" -> cgroup path of `pid` in that v1 hierarchy.
std::map<std::string, std::string> V1Cgroups(pid_t pid) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(ReadFile(absl::StrCat("/proc/", pid, "/cgroup")), '\n',
                                               absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) out[std::string(c)] = f[2];
  }
  return out;
}

// Moves this whole process (every thread) into the v1 cgroup `dir`.
void MoveSelfTo(const std::string& dir) {
  std::ofstream procs(dir + "/cgroup.procs");
  procs << getpid() << std::flush;
  ASSERT_TRUE(procs.good()) << "cannot move the test into " << dir;
}

class AgentFindingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the sandbox needs root; CI runs this suite as root";
    bin_ = getenv("ATHANOR_BIN_DIR");
    probe_ = bin_ + "/sandbox_probe";
    dev_ = cluster_.dir() + "/dev";
    fs::create_directories(dev_);
    // Stand-in GPU nodes: NVIDIA's major 195; without its driver an open the
    // sandbox allows fails with ENXIO, unlike ENOENT (not there) or EPERM (cgroup).
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(mknod(absl::StrCat(dev_, "/nvidia", i).c_str(), S_IFCHR | 0666, makedev(195, i)), 0);
    }
    ASSERT_EQ(mknod((dev_ + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);
    cluster_.StartCoordinator();
  }

  void StartAgent() { cluster_.StartAgent("node-a", 2, "127.0.0.1", {"--gpu-device-dir", dev_}); }
  std::string AgentLog() { return ReadFile(cluster_.dir() + "/agent-node-a.log"); }
  std::string NodeDir() { return cluster_.dir() + "/node-a"; }
  std::string Log(const std::string& id) {
    return ReadFile(absl::StrCat(NodeDir(), "/jobs/", id, "/attempt-1/rank-0.log"));
  }
  std::string Submit(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
    std::vector<std::string> args = {"submit", "--nodes", "1", "--gpus-per-node", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    CliResult r = cluster_.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  pid_t RankHostPid(const std::string& id) { return athanor::testing::RankHostPid(NodeDir(), id); }

  LocalCluster cluster_;
  std::string bin_, probe_, dev_;
};

TEST_F(AgentFindingsTest, JobLdPreloadNeverRunsAsRoot) {
  StartAgent();
  ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << AgentLog();
  const std::string lib = bin_ + "/libroot_marker.so";
  ASSERT_TRUE(fs::exists(lib)) << lib;
  // The marker works: a root process that preloads the library leaves one.
  const std::string control = cluster_.dir() + "/control";
  ASSERT_EQ(mkdir(control.c_str(), 0700), 0);
  std::string run = absl::StrCat("env LD_PRELOAD=", lib, " ROOT_MARKER_DIR=", control, " /bin/true");
  ASSERT_EQ(system(run.c_str()), 0);
  ASSERT_FALSE(fs::is_empty(control)) << "the marker library left no marker as root";

  const std::string marks = cluster_.dir() + "/root-only";
  ASSERT_EQ(mkdir(marks.c_str(), 0700), 0);
  std::string id = Submit({"--env", "LD_PRELOAD=" + lib, "--env", "ROOT_MARKER_DIR=" + marks},
                          {"sh", "-c", "echo uid=$(id -ru) euid=$(id -u) preload=$LD_PRELOAD"});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << Log(id) << AgentLog();
  // The rank ran its command as the tenant, with its LD_PRELOAD.
  std::smatch m;
  std::string log = Log(id);
  ASSERT_TRUE(std::regex_search(log, m, std::regex("uid=([0-9]+) euid=([0-9]+) preload=(.*)\n"))) << log;
  EXPECT_GE(std::stoul(m[1]), 200000u) << log;
  EXPECT_EQ(m[1], m[2]) << log;
  EXPECT_EQ(m[3], lib) << log;
  std::string found;
  for (const auto& e : fs::directory_iterator(marks)) {
    absl::StrAppend(&found, e.path().filename().string(), ": ", ReadFile(e.path().string()));
  }
  EXPECT_EQ(found, "") << "the job's LD_PRELOAD ran as root (uid euid exe)";
}

// kill -9 an agent while its job holds a GPU, restart it (as a service manager
// might, in another cgroup) on the same work dir: nothing the killed agent made
// is left in any v1 hierarchy, and a new job's device rights are its own.
TEST_F(AgentFindingsTest, RestartedAgentStartsFromACleanSlate) {
  std::map<std::string, std::string> own = V1Cgroups(getpid());
  for (const char* c : {"memory", "pids", "devices", "cpu"}) {
    ASSERT_TRUE(own.count(c) && fs::exists(absl::StrCat("/sys/fs/cgroup/", c, "/cgroup.procs")))
        << "this test needs the v1 " << c << " hierarchy";
  }
  // The first agent runs in a memory cgroup of its own; its successor does not.
  const std::string memory_home = "/sys/fs/cgroup/memory" + (own["memory"] == "/" ? "" : own["memory"]);
  const std::string memory_away = absl::StrCat(memory_home, "/agent-findings-test-", getpid());
  ASSERT_EQ(mkdir(memory_away.c_str(), 0755), 0) << memory_away;
  MoveSelfTo(memory_away);
  StartAgent();
  MoveSelfTo(memory_home);
  ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << AgentLog();

  std::string old_job = Submit({}, {"sh", "-c", "echo started; exec sleep 600"});
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return Log(old_job).find("started") != std::string::npos; }))
      << Log(old_job) << AgentLog();
  const pid_t old_rank = RankHostPid(old_job);
  ASSERT_GT(old_rank, 1);
  std::vector<std::string> killed_agents;  // its job cgroups, and its memory base
  for (const auto& [c, path] : V1Cgroups(old_rank)) {
    if (c != "memory" && c != "pids" && c != "devices" && c != "cpu") continue;
    std::string dir = absl::StrCat("/sys/fs/cgroup/", c, path);
    ASSERT_NE(path.find("/athanor-node_a-"), std::string::npos) << dir;
    killed_agents.push_back(dir);
    if (c == "memory") {
      ASSERT_EQ(fs::path(dir).parent_path().parent_path().string(), memory_away) << dir;
      killed_agents.push_back(fs::path(dir).parent_path().string());
    }
  }
  ASSERT_EQ(killed_agents.size(), 5u);
  for (const std::string& d : killed_agents) ASSERT_TRUE(fs::exists(d)) << d;

  cluster_.KillAgent("node-a");
  LocalCluster::RearmWatchdog();
  StartAgent();
  auto leftovers = [&] {
    std::string left;
    for (const std::string& d : killed_agents) {
      if (fs::exists(d)) absl::StrAppend(&left, d, "\n");
    }
    return left;
  };
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return leftovers().empty(); }))
      << "left by the killed agent:\n" << leftovers() << AgentLog();
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return agent::ProcessStartTime(old_rank) < 0; }))
      << "the killed agent's rank still runs: " << old_rank;
  CliResult lost = cluster_.Cli({"wait", old_job, "--timeout", "30"});
  EXPECT_NE(lost.out.find("was lost (its agent restarted)"), std::string::npos) << lost.out;

  // Through /dev the mount namespace decides; through the host's nodes (in the
  // shared test dir) only the new job's devices cgroup does.
  LocalCluster::RearmWatchdog();
  std::vector<std::string> opens;
  for (const std::string& d : {std::string("/dev"), dev_}) {
    for (int g = 0; g < 2; ++g) opens.push_back(absl::StrCat("open:", d, "/nvidia", g));
  }
  std::string id = Submit({}, {"sh", "-c", absl::StrCat("echo gpu=$CUDA_VISIBLE_DEVICES; exec ", probe_, " ",
                                                        absl::StrJoin(opens, " "))});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << Log(id) << AgentLog();
  std::string log = Log(id);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("gpu=([01])\n"))) << log;
  int mine = std::stoi(m[1]), other = 1 - mine;
  EXPECT_EQ(ProbeLine(log, absl::StrCat("open:/dev/nvidia", mine)), "ENXIO") << log;
  EXPECT_EQ(ProbeLine(log, absl::StrCat("open:/dev/nvidia", other)), "ENOENT") << log;
  EXPECT_EQ(ProbeLine(log, absl::StrCat("open:", dev_, "/nvidia", mine)), "ENXIO") << log;
  EXPECT_EQ(ProbeLine(log, absl::StrCat("open:", dev_, "/nvidia", other)), "EPERM") << log;

  // Whatever the outcome, leave the host's hierarchy as it was.
  for (const std::string& d : killed_agents) agent::JobCgroup::RemoveTree(d, std::chrono::seconds(5));
  EXPECT_TRUE(agent::JobCgroup::RemoveTree(memory_away, std::chrono::seconds(5))) << memory_away;
}

// 3. A relative link planted in a job's file:// checkpoint folder led the
//    agent (as root) to make, own and bind a folder through it: a later job
//    naming the link as its checkpoint root got the agent's masked work dir
//    (other tenants' logs, the agent's records) owned by its uid and mounted
//    writable. Now checkpoint folders are made only along real folders.
TEST_F(AgentFindingsTest, LinkInACheckpointRootReachesNothing) {
  StartAgent();
  ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << AgentLog();
  const std::string store = cluster_.dir() + "/store";  // shared with ranks (the harness's dir)
  // Job 1 plants, in its own checkpoint folder, a link up to the agent's work dir.
  std::string planter = Submit({"--checkpoint-uri", "file://" + store},
                               {"sh", "-c", "ln -s ../../node-a " + store + "/$ATHANOR_JOB_ID/escape && echo planted"});
  CliResult wait = cluster_.Cli({"wait", planter, "--timeout", "30"});
  ASSERT_EQ(wait.out, "job " + planter + " SUCCEEDED\n") << Log(planter) << AgentLog();
  const std::string link = store + "/" + planter + "/escape";
  ASSERT_TRUE(fs::is_symlink(link)) << Log(planter);
  ASSERT_TRUE(fs::exists(link + "/jobs/" + planter)) << "the link must lead to the work dir for the attempt to mean anything";
  // Job 2 names the link as its checkpoint root, and would read job 1's log through it.
  std::string thief = Submit({"--checkpoint-uri", "file://" + link},
                             {"sh", "-c", "cat " + link + "/jobs/" + planter + "/attempt-1/rank-0.log"});
  wait = cluster_.Cli({"wait", thief, "--timeout", "30"});
  EXPECT_EQ(wait.out, absl::StrCat("job ", thief, " FAILED: rank 0 on node node-a exited with code 127: cannot sandbox: "
                                   "ATHANOR_CHECKPOINT_URI: ", link,
                                   " is a link; a checkpoint folder is made only along real folders\n"))
      << AgentLog();
  EXPECT_FALSE(fs::exists(NodeDir() + "/" + thief)) << "a folder was made through the link";
  struct stat st;
  ASSERT_EQ(stat(NodeDir().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the agent's work dir was given away";
  EXPECT_EQ(Log(thief).find("planted"), std::string::npos);
}

// 4. A link in place of a rank log is followed neither to write the rank's
// output nor to serve `athanor logs`. The key stands in for the agent's TLS
// private key (root's, 0600); a tenant that could plant a link in the agent's
// work dir (as the relative link in a checkpoint root once allowed) aims it there.
TEST_F(AgentFindingsTest, APlantedLinkInPlaceOfARankLogIsNeitherWrittenNorRead) {
  StartAgent();
  ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << AgentLog();
  const std::string key = cluster_.dir() + "/agent-key.pem";
  const std::string secret = "-----BEGIN PRIVATE KEY----- stand-in\n";
  {
    std::ofstream(key) << secret;
  }
  ASSERT_EQ(chmod(key.c_str(), 0600), 0);

  // Writing: the first job's log (job ids start at 1) is a link before it starts.
  const std::string first = NodeDir() + "/jobs/1/attempt-1";
  fs::create_directories(first);
  ASSERT_EQ(symlink(key.c_str(), (first + "/rank-0.log").c_str()), 0);
  std::string id = Submit({}, {"sh", "-c", "echo written-through-the-link"});
  ASSERT_EQ(id, "1");
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.out, "job 1 FAILED: rank 0 on node node-a exited with code 127: cannot open the rank's log: " +
                          first + "/rank-0.log is a link; the agent does not follow it\n")
      << AgentLog();
  EXPECT_EQ(ReadFile(key), secret);  // nothing appended through the link

  // Reading: a finished job's log replaced by a link.
  id = Submit({}, {"sh", "-c", "echo visible"});
  wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << AgentLog();
  const std::string log = NodeDir() + "/jobs/" + id + "/attempt-1/rank-0.log";
  ASSERT_EQ(ReadFile(log), "visible\n");
  ASSERT_EQ(unlink(log.c_str()), 0);
  ASSERT_EQ(symlink(key.c_str(), log.c_str()), 0);
  CliResult logs = cluster_.Cli({"logs", id});
  EXPECT_EQ((logs.out + logs.err).find("PRIVATE KEY"), std::string::npos) << logs.out << logs.err;
  EXPECT_NE((logs.out + logs.err).find("a link planted in its place is not followed"), std::string::npos)
      << logs.out << logs.err;
}

}  // namespace
}  // namespace athanor::testing
