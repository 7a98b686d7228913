// Escape attempts from inside a sandboxed rank (worker/agent/sandbox.h): one
// test per attempt, each run by sandbox_probe as a job's rank on a real agent,
// each expected to fail with an exact errno and to leave nothing changed.
// The suite ends by printing a table of attempt, expected result and result.
//
// Needs root (the agent sandboxes only as root); as any other user the one
// test that can run is the agent refusing to start, and the others fail, so
// that CI (root) cannot pass by skipping them.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <regex>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "collectives/bootstrap/tcp_store.h"
#include "common/net.h"
#include "tests/cluster_harness.h"
#include "worker/agent/orphans.h"
#include "worker/agent/sandbox.h"

namespace athanor::testing {
namespace {

namespace fs = std::filesystem;

struct Row {
  std::string attempt, expected, result;
};
std::vector<Row>& Table() {
  static std::vector<Row> rows;
  return rows;
}

// Records one attempt in the table and checks it.
void Attempt(const std::string& attempt, const std::string& expected, const std::string& result) {
  Table().push_back({attempt, expected, result});
  EXPECT_EQ(result, expected) << attempt;
}

class PrintTable : public ::testing::Environment {
 public:
  void TearDown() override {
    size_t w0 = 7, w1 = 8;
    for (const Row& r : Table()) {
      w0 = std::max(w0, r.attempt.size());
      w1 = std::max(w1, r.expected.size());
    }
    std::cout << "\n" << std::left << std::setw(w0 + 2) << "ATTEMPT" << std::setw(w1 + 2) << "EXPECTED"
              << "RESULT\n";
    for (const Row& r : Table()) {
      std::cout << std::setw(w0 + 2) << r.attempt << std::setw(w1 + 2) << r.expected << r.result
                << (r.result == r.expected ? "" : "   <-- ESCAPED") << "\n";
    }
  }
};
const auto* const kTable = ::testing::AddGlobalTestEnvironment(new PrintTable);

constexpr char kKey[] = "sandbox-escape-test-cluster-key";

class SandboxEscapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the sandbox needs root; CI runs this suite as root";
    cluster_.KeepDirFromRanks();
    dev_ = cluster_.dir() + "/dev";
    fs::create_directories(dev_);
    // Stand-in GPU nodes: NVIDIA's major 195; without its driver an open the
    // sandbox allows fails with ENXIO, unlike ENOENT (not there) or EPERM (cgroup).
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(mknod(absl::StrCat(dev_, "/nvidia", i).c_str(), S_IFCHR | 0666, makedev(195, i)), 0);
    }
    ASSERT_EQ(mknod((dev_ + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);
    std::ofstream(cluster_.dir() + "/key") << kKey;
    // Variables only the agent has: no rank may see them.
    setenv("AWS_SECRET_ACCESS_KEY", "agent-only-aws-key", 1);
    setenv("ATHANOR_AGENT_MARKER", "agent-only-marker", 1);
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-a", 2, "127.0.0.1",
                        {"--gpu-device-dir", dev_, "--memory-mb", "256", "--sandbox-pids-max", "64",
                         "--rendezvous-key-file", cluster_.dir() + "/key"});
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("ATHANOR_AGENT_MARKER");
    ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << cluster_.CoordinatorLog() << AgentLog();
    probe_ = std::string(getenv("ATHANOR_BIN_DIR")) + "/sandbox_probe";
  }

  std::string AgentLog() { return ReadFile(cluster_.dir() + "/agent-node-a.log"); }
  std::string NodeDir() { return cluster_.dir() + "/node-a"; }

  std::string Submit(const std::vector<std::string>& command, int gpus = 1) {
    std::vector<std::string> args = {"submit", "--nodes", "1", "--gpus-per-node", std::to_string(gpus), "--"};
    args.insert(args.end(), command.begin(), command.end());
    CliResult r = cluster_.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  std::string Log(const std::string& id) {
    return ReadFile(absl::StrCat(NodeDir(), "/jobs/", id, "/attempt-1/rank-0.log"));
  }
  // Runs the probe's attempts as a job to completion; its output lines by attempt.
  // (`binary`: a copy of the probe to run instead, e.g. one elsewhere.)
  std::map<std::string, std::string> Probe(const std::vector<std::string>& attempts, const std::string& binary = "") {
    std::vector<std::string> cmd = {binary.empty() ? probe_ : binary};
    cmd.insert(cmd.end(), attempts.begin(), attempts.end());
    std::string id = Submit(cmd);
    CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
    EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << Log(id) << AgentLog();
    std::map<std::string, std::string> out;
    for (absl::string_view line : absl::StrSplit(Log(id), '\n', absl::SkipEmpty())) {
      size_t sep = line.find(": ");
      if (sep != absl::string_view::npos) out[std::string(line.substr(0, sep))] = std::string(line.substr(sep + 2));
    }
    return out;
  }
  // A job that serves a TCP store on `port` until cancelled; waits until it does.
  std::string StartServer(int port) {
    std::string id = Submit({"sh", "-c", absl::StrCat("echo tenant-data > \"$HOME/private\"; exec ", probe_,
                                                      " serve:", port)});
    EXPECT_TRUE(LocalCluster::WaitFor([&] { return Log(id).find("serving") != std::string::npos; }))
        << Log(id) << AgentLog();
    return id;
  }
  rpc::JobState State(const std::string& id) { return cluster_.GetJob(id).state(); }
  pid_t RankHostPid(const std::string& id) { return athanor::testing::RankHostPid(NodeDir(), id); }

  LocalCluster cluster_;
  std::string dev_, probe_;
};

TEST_F(SandboxEscapeTest, ReadOtherJobsWorkFolderAndAgentState) {
  std::string a = StartServer(PickFreePort().value());
  const std::string secret = absl::StrCat(NodeDir(), "/jobs/", a, "/work/private");
  ASSERT_EQ(ReadFile(secret), "tenant-data\n") << "the other job's file must exist for the attempt to mean anything";
  const std::string log = absl::StrCat(NodeDir(), "/jobs/", a, "/attempt-1/rank-0.log");
  auto out = Probe({"open:" + secret, "open:" + log, "open:" + NodeDir() + "/run",
                    "open:" + cluster_.dir() + "/state.db"});
  Attempt("read another job's work folder", "ENOENT", out["open:" + secret]);
  Attempt("read another job's log", "ENOENT", out["open:" + log]);
  Attempt("read the agent's state folder", "ENOENT", out["open:" + NodeDir() + "/run"]);
  Attempt("read the coordinator's state", "ENOENT", out["open:" + cluster_.dir() + "/state.db"]);
  EXPECT_EQ(ReadFile(secret), "tenant-data\n");
}

// A command in a folder under /tmp (which every sandbox hides): refused while
// the tenant's uid cannot read it on this machine, with the way out named; once
// it can, the rank runs it and sees that one file of its folder, nothing else.
TEST_F(SandboxEscapeTest, RunACommandFromAFolderTheTenantCannotRead) {
  const std::string dir = absl::StrCat("/tmp/athanor-private-", getpid());
  fs::remove_all(dir);
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string tool = dir + "/probe";
  fs::copy_file(probe_, tool);
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  std::ofstream(dir + "/secret") << "root's\n";
  ASSERT_EQ(chmod((dir + "/secret").c_str(), 0644), 0);
  const std::vector<std::string> attempts = {"open:" + dir + "/secret", "list:" + dir};

  std::vector<std::string> command = {tool};
  command.insert(command.end(), attempts.begin(), attempts.end());
  std::string refused = Submit(command);
  CliResult wait = cluster_.Cli({"wait", refused, "--timeout", "30"});
  const std::string expected = "the command " + tool + " lies under /tmp, which the rank's sandbox hides, and the "
                               "tenant's uid ";
  EXPECT_EQ(wait.out.rfind("job " + refused + " FAILED: rank 0 on node node-a exited with code 127: cannot sandbox: " +
                               expected, 0),
            0u)
      << wait.out << wait.err << AgentLog();
  std::string reason = cluster_.Cli({"job", refused, "--json"}).out;
  EXPECT_NE(reason.find(expected), std::string::npos) << reason;
  std::smatch uid;
  ASSERT_TRUE(std::regex_search(reason, uid, std::regex("the tenant's uid ([0-9]+) cannot read and execute it there; "
                                                        "make it readable and executable by uid ([0-9]+)")))
      << reason;
  EXPECT_EQ(uid[1], uid[2]);
  const std::string way_out = "or install it where ranks see it (for example /usr/local/bin or /opt)";
  EXPECT_NE(reason.find(way_out), std::string::npos) << reason;
  // The whole reason is in the rank's log too.
  std::string log = Log(refused);
  EXPECT_NE(log.find("athanor-agent: the rank failed to start: cannot sandbox: " + expected), std::string::npos) << log;
  EXPECT_NE(log.find(way_out + "\n"), std::string::npos) << log;
  Attempt("run a command in a folder the tenant cannot read", "refused",
          reason.find(expected) != std::string::npos ? "refused" : "ran");

  // Searchable, not listable: the tenant may run the tool, and sees only it.
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);
  auto out = Probe(attempts, tool);
  Attempt("read a file beside the command it was shown", "ENOENT", out["open:" + dir + "/secret"]);
  Attempt("list the folder of the command it was shown", "probe", out["list:" + dir]);
  fs::remove_all(dir);
}

TEST_F(SandboxEscapeTest, ReadAgentEnvironment) {
  const pid_t agent = cluster_.agent_pid("node-a");
  std::string environ_path = absl::StrCat("/proc/", agent, "/environ");
  ASSERT_NE(ReadFile(environ_path).find("agent-only-marker"), std::string::npos);
  std::string id = Submit({"sh", "-c", absl::StrCat("env; exec ", probe_, " open:", environ_path)});
  ASSERT_EQ(cluster_.Cli({"wait", id, "--timeout", "30"}).exit_code, 0) << Log(id) << AgentLog();
  std::string log = Log(id);
  Attempt("read /proc/<agent>/environ", "ENOENT", ProbeLine(log, "open:" + environ_path));
  bool leaked = log.find("agent-only") != std::string::npos;
  Attempt("find the agent's variables in its own env", "none", leaked ? "found" : "none");
  EXPECT_NE(log.find("ATHANOR_JOB_ID=" + id), std::string::npos) << log;  // the env contract is there
  EXPECT_NE(log.find("ATHANOR_RENDEZVOUS_SECRET="), std::string::npos) << log;
}

TEST_F(SandboxEscapeTest, SeeSignalAndTraceOutsideItsJob) {
  std::string a = StartServer(PickFreePort().value());
  const pid_t agent = cluster_.agent_pid("node-a");
  const pid_t other = RankHostPid(a);
  ASSERT_GT(other, 1);
  auto out = Probe({"procs", absl::StrCat("kill:", agent), absl::StrCat("ptrace:", agent),
                    absl::StrCat("kill:", other), absl::StrCat("ptrace:", other), "kill:1", "ptrace:1"});
  Attempt("list processes", "1=athanor-sandbox 2=sandbox_probe", out["procs"]);
  Attempt("kill the agent", "ESRCH", out[absl::StrCat("kill:", agent)]);
  Attempt("ptrace the agent", "ESRCH", out[absl::StrCat("ptrace:", agent)]);
  Attempt("kill another job's rank", "ESRCH", out[absl::StrCat("kill:", other)]);
  Attempt("ptrace another job's rank", "ESRCH", out[absl::StrCat("ptrace:", other)]);
  Attempt("kill its namespace's init", "EPERM", out["kill:1"]);
  Attempt("ptrace its namespace's init", "EPERM", out["ptrace:1"]);
  EXPECT_EQ(kill(agent, 0), 0) << "the agent must still run";
  EXPECT_EQ(kill(other, 0), 0) << "the other job's rank must still run";
  EXPECT_EQ(State(a), rpc::JOB_RUNNING);
}

TEST_F(SandboxEscapeTest, OpenUnallocatedGpu) {
  // The job gets one of the two GPUs; which one is in its CUDA_VISIBLE_DEVICES.
  std::string id = Submit({"sh", "-c", absl::StrCat("echo gpu=$CUDA_VISIBLE_DEVICES; exec ", probe_,
                                                    " open:/dev/nvidia0 open:/dev/nvidia1 open:/dev/nvidiactl; ")});
  ASSERT_EQ(cluster_.Cli({"wait", id, "--timeout", "30"}).exit_code, 0) << Log(id) << AgentLog();
  std::string log = Log(id);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("gpu=([01])\n"))) << log;
  int mine = std::stoi(m[1]), other = 1 - mine;
  auto line = [&](const std::string& attempt) { return ProbeLine(log, attempt); };
  Attempt("open its own GPU (no driver here)", "ENXIO", line(absl::StrCat("open:/dev/nvidia", mine)));
  Attempt("open a GPU not allocated to it", "ENOENT", line(absl::StrCat("open:/dev/nvidia", other)));
  Attempt("open the GPU control node", "ENXIO", line("open:/dev/nvidiactl"));
}

TEST_F(SandboxEscapeTest, DevicesCgroupRefusesUnallocatedGpu) {
  // Even through a node the mount namespace did not hide, the job's devices
  // cgroup refuses the GPU it was not given: a process put in that cgroup
  // opens the host's stand-in nodes.
  std::string a = StartServer(PickFreePort().value());
  // The rank's own devices cgroup, as the kernel has it (a search by name
  // could find another agent's group of a job with the same id).
  std::string group;
  std::ifstream cgroups(absl::StrCat("/proc/", RankHostPid(a), "/cgroup"));
  for (std::string line; std::getline(cgroups, line);) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() == 3 && f[1] == "devices") group = "/sys/fs/cgroup/devices" + f[2];
  }
  ASSERT_TRUE(absl::EndsWith(group, "/" + a + ".1") && group.find("/athanor-node_a-") != std::string::npos)
      << "no devices cgroup for job " << a << ": '" << group << "'";
  std::string cuda;
  std::ifstream env(absl::StrCat("/proc/", RankHostPid(a), "/environ"));
  for (std::string kv; std::getline(env, kv, '\0');) {
    if (kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) cuda = kv.substr(21);
  }
  ASSERT_TRUE(cuda == "0" || cuda == "1") << cuda;
  // The child only makes async-signal-safe calls (this process has threads).
  const std::string paths[3] = {dev_ + "/nvidia0", dev_ + "/nvidia1", dev_ + "/nvidiactl"};
  int go[2], back[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(back), 0);
  pid_t child = fork();
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);
    for (const std::string& p : paths) {
      int fd = open(p.c_str(), O_RDONLY);
      int e = fd >= 0 ? 0 : errno;
      if (write(back[1], &e, sizeof(e)) != sizeof(e)) _exit(4);
    }
    _exit(0);
  }
  close(back[1]);
  std::ofstream(group + "/cgroup.procs") << child;
  ASSERT_EQ(write(go[1], "g", 1), 1);
  std::vector<std::string> r;
  for (int e = 0; read(back[0], &e, sizeof(e)) == sizeof(e);) r.push_back(e == 0 ? "ok" : strerrorname_np(e));
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(r.size(), 3u);
  Attempt("devices cgroup: its own GPU", "ENXIO", r[std::stoi(cuda)]);
  Attempt("devices cgroup: a GPU not allocated", "EPERM", r[1 - std::stoi(cuda)]);
  Attempt("devices cgroup: the control node", "ENXIO", r[2]);
}

TEST_F(SandboxEscapeTest, AllocatePastItsMemoryLimit) {
  std::string neighbour = StartServer(PickFreePort().value());
  // 256 MiB node, 2 GPUs: a 1-GPU job may use 128 MiB.
  std::string id = Submit({probe_, "alloc:1024"});
  CliResult wait = cluster_.Cli({"wait", id, "--timeout", "30"});
  EXPECT_NE(wait.out.find(" FAILED: rank 0 on node node-a was killed by signal 9 (exit code 137): "
                          "out of memory"),
            std::string::npos)
      << wait.out << Log(id);
  std::string line = absl::StrCat("job ", id, " attempt 1 rank 0 killed by signal 9 (Killed): out of memory");
  bool reported = LocalCluster::WaitFor([&] { return AgentLog().find(line) != std::string::npos; });
  Attempt("allocate 1 GiB under a 128 MiB limit", "out of memory", reported ? "out of memory" : Log(id));
  EXPECT_EQ(Log(id).find("allocated 160 MiB"), std::string::npos) << Log(id);
  EXPECT_EQ(kill(cluster_.agent_pid("node-a"), 0), 0) << "the agent must still run";
  EXPECT_EQ(State(neighbour), rpc::JOB_RUNNING) << "the neighbouring job must still run";
}

TEST_F(SandboxEscapeTest, ForkBomb) {
  auto out = Probe({"forkbomb:10000"});
  // pids.max 64 per job: the probe is one, so 63 forks succeed.
  Attempt("fork bomb", "failed after 63 forks: EAGAIN", out["forkbomb:10000"]);
  EXPECT_EQ(kill(cluster_.agent_pid("node-a"), 0), 0);
}

TEST_F(SandboxEscapeTest, WriteOutsideWorkFolderAndTmp) {
  const std::string agent_file = NodeDir() + "/planted";
  std::string id = Submit({"sh", "-c", absl::StrCat("id -u; exec ", probe_, " write:/etc/planted write:/usr/planted ",
                                                    "write:", agent_file, " write:/tmp/ok write:\"$HOME/ok\"")});
  ASSERT_EQ(cluster_.Cli({"wait", id, "--timeout", "30"}).exit_code, 0) << Log(id) << AgentLog();
  std::string log = Log(id);
  auto line = [&](const std::string& attempt) { return ProbeLine(log, attempt); };
  Attempt("write /etc", "EROFS", line("write:/etc/planted"));
  Attempt("write /usr", "EROFS", line("write:/usr/planted"));
  Attempt("write the agent's work dir", "EROFS", line("write:" + agent_file));
  Attempt("write /tmp (private)", "ok", line("write:/tmp/ok"));
  const std::string work = absl::StrCat(NodeDir(), "/jobs/", id, "/work");
  Attempt("write its work folder", "ok", line("write:" + work + "/ok"));
  EXPECT_FALSE(fs::exists("/etc/planted"));
  EXPECT_FALSE(fs::exists("/usr/planted"));
  EXPECT_FALSE(fs::exists(agent_file));
  struct stat st;
  ASSERT_EQ(stat((work + "/ok").c_str(), &st), 0);
  uint32_t uid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(log.substr(0, log.find('\n')), &uid)) << log;
  EXPECT_GE(uid, 200000u);
  EXPECT_EQ(st.st_uid, uid) << "files in the work folder belong to the tenant's uid";
}

TEST_F(SandboxEscapeTest, JoinAnotherAttemptsStore) {
  const int port = PickFreePort().value();
  std::string a = StartServer(port);
  const std::string target = absl::StrCat("127.0.0.1:", port);
  auto out = Probe({"store:" + target, "store-nosecret:" + target});
  Attempt("join another job's TCP store with its own secret", "connect: PERMISSION_DENIED", out["store:" + target]);
  Attempt("join another job's TCP store without a secret", "set: UNAVAILABLE", out["store-nosecret:" + target]);
  auto owner = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5),
                                       agent::Sandbox::RendezvousSecret(kKey, a, 1));
  ASSERT_TRUE(owner.ok()) << owner.status();
  auto value = (*owner)->Get("owner", std::chrono::seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, a) << "the store's key was changed";
}

TEST_F(SandboxEscapeTest, RestartedAgentEndsOrphanedSandbox) {
  std::string a = StartServer(PickFreePort().value());
  pid_t rank = RankHostPid(a);
  pid_t holder = 0;
  std::ifstream(absl::StrCat(NodeDir(), "/run/", a, ".1.-1.pid")) >> holder;
  ASSERT_GT(rank, 1);
  ASSERT_GT(holder, 1);
  cluster_.KillAgent("node-a");
  EXPECT_EQ(kill(rank, 0), 0) << "the rank outlives a SIGKILLed agent";
  cluster_.StartAgent("node-a", 2, "127.0.0.1", {"--gpu-device-dir", dev_, "--rendezvous-key-file", cluster_.dir() + "/key"});
  auto gone = [](pid_t p) { return agent::ProcessStartTime(p) < 0; };
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return gone(rank) && gone(holder); }))
      << "orphaned sandbox still runs: rank " << rank << " holder " << holder;
  CliResult wait = cluster_.Cli({"wait", a, "--timeout", "30"});
  EXPECT_NE(wait.out.find("was lost (its agent restarted)"), std::string::npos) << wait.out;
  EXPECT_TRUE(fs::is_empty(NodeDir() + "/run"));
}

// As any user but root the agent cannot sandbox: it refuses to start and says
// why, unless told --no-sandbox.
TEST(SandboxRefusalTest, UnprivilegedAgentRefusesWithoutNoSandbox) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  std::string bin = getenv("ATHANOR_BIN_DIR");
  auto run_agent = [&](const std::vector<std::string>& extra) {
    SubprocessOptions o;
    o.argv = {"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
              bin + "/athanor-agent", "--coordinator", cluster.address(), "--name", "nobody",
              "--gpus", "1", "--work-dir", cluster.dir() + "/nobody"};
    if (geteuid() != 0) o.argv.erase(o.argv.begin(), o.argv.begin() + 7);
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    std::vector<std::string> tls = cluster.AgentSecurityFlags("nobody", geteuid() == 0 ? 65534 : geteuid());
    o.argv.insert(o.argv.end(), tls.begin(), tls.end());
    o.stdout_path = cluster.dir() + "/nobody.log";
    o.stderr_path = "=stdout";
    return Subprocess::Start(o);
  };
  auto refused = run_agent({});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ((*refused)->Wait().exit_code, 2);
  std::string log = ReadFile(cluster.dir() + "/nobody.log");
  Attempt("start an unprivileged agent", "refused",
          log.find("cannot sandbox ranks on this machine: the agent does not run as root") != std::string::npos &&
                  log.find("pass --no-sandbox") != std::string::npos
              ? "refused"
              : log);
  auto allowed = run_agent({"--no-sandbox"});
  ASSERT_TRUE(allowed.ok());
  EXPECT_TRUE(cluster.WaitForNodesUp(1)) << ReadFile(cluster.dir() + "/nobody.log");
  (*allowed)->Signal(SIGTERM).IgnoreError();
  (*allowed)->Wait();
}

}  // namespace
}  // namespace athanor::testing
