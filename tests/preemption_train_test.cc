// End to end: a high-priority job preempts a preemptible athanor-train job on
// a full two-agent cluster; the victim checkpoints within its grace, is
// requeued (no restart consumed), resumes from that checkpoint when capacity
// returns and ends with exactly the weights of an uninterrupted run.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// What `athanor logs --rank R` prints for a rank's log: every line prefixed.
std::string PrefixedLines(int rank, const std::string& log) {
  std::vector<absl::string_view> lines = absl::StrSplit(log, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (absl::string_view line : lines) absl::StrAppend(&out, "[rank ", rank, "] ", line, "\n");
  return out;
}

// The value of `key` in the first JSON line of `log` carrying `event`; -1 if none.
int64_t EventValue(const std::string& log, const std::string& event, const std::string& key) {
  std::regex re("\\{\"event\":\"" + event + "\".*\"" + key + "\":(\\d+)");
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    std::smatch m;
    std::string l(line);
    if (std::regex_search(l, m, re)) return std::stoll(m[1]);
  }
  return -1;
}

bool TrainHasCheckpointFlags(LocalCluster& c) {
  const char* bin = std::getenv("ATHANOR_BIN_DIR");
  std::string path = absl::StrCat(bin == nullptr ? "." : bin, "/athanor-train");
  SubprocessOptions o;
  o.argv = {path, "--help"};
  o.capture_stdout = true;
  o.stderr_path = c.dir() + "/train-help.err";
  auto p = Subprocess::Start(o);
  if (!p.ok()) return false;
  std::string out = (*p)->ReadAllStdout();
  (*p)->Wait();
  return out.find("--checkpoint-every") != std::string::npos;
}

TEST(PreemptionTrainTest, PreemptedTrainingResumesFromCheckpointWithIdenticalWeights) {
  LocalCluster cluster({"--min-run-time-s", "0", "--checkpoint-poll-s", "0.2"});
  ASSERT_TRUE(TrainHasCheckpointFlags(cluster)) << "athanor-train --help lacks --checkpoint-every";
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const std::string steps = "300";
  auto train = [&](const std::string& weights) {
    return std::vector<std::string>{
        std::string(std::getenv("ATHANOR_BIN_DIR")) + "/athanor-train", "--seed", "5", "--hidden", "48", "--optimizer", "sgd", "--lr", "0.05", "--bucket-mb", "0.05",
        "--first-bucket-mb", "0.01", "--timeout-s", "20", "--steps", steps, "--checkpoint-every",
        "1", "--dump-weights", weights};
  };
  auto submit = [&](std::vector<std::string> args, const std::vector<std::string>& cmd) {
    args.insert(args.begin(), "submit");
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    CliResult r = cluster.Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  };
  // The uninterrupted reference, on the same cluster and layout.
  const std::string reference = cluster.dir() + "/reference.safetensors";
  std::string ref = submit({"--nodes", "2", "--gpus-per-node", "1", "--checkpoint-uri",
                            "file://" + cluster.dir() + "/store-ref"},
                           train(reference));
  CliResult wait = cluster.Cli({"wait", ref, "--timeout", "60"});
  ASSERT_EQ(wait.out, "job " + ref + " SUCCEEDED\n") << cluster.CoordinatorLog();

  const std::string resumed = cluster.dir() + "/resumed.safetensors";
  std::string victim = submit({"--nodes", "2", "--gpus-per-node", "1", "--preemptible", "--grace",
                               "20s", "--checkpoint-uri", "file://" + cluster.dir() + "/store"},
                              train(resumed));
  // Preempt once a few checkpoints are committed (read by the coordinator).
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(victim).committed_step() >= 3; },
                                    std::chrono::seconds(40)))
      << cluster.CoordinatorLog();
  std::string high = submit({"--nodes", "1", "--gpus-per-node", "1", "--priority", "10"},
                            {"sh", "-c", "echo urgent"});
  wait = cluster.Cli({"wait", high, "--timeout", "60"});
  EXPECT_EQ(wait.out, "job " + high + " SUCCEEDED\n") << cluster.CoordinatorLog();
  wait = cluster.Cli({"wait", victim, "--timeout", "60"});
  ASSERT_EQ(wait.out, "job " + victim + " SUCCEEDED\n") << cluster.CoordinatorLog();
  rpc::Job job = cluster.GetJob(victim);
  EXPECT_EQ(job.attempt(), 2) << "the victim finished before it was preempted; raise --steps";
  EXPECT_EQ(job.restarts(), 0);
  // Attempt 1 checkpointed on SIGTERM and exited 0; attempt 2 resumed there.
  std::string log1, log2;
  for (const char* node : {"node-a", "node-b"}) {
    log1 += ReadFile(absl::StrCat(cluster.dir(), "/", node, "/jobs/", victim, "/attempt-1/rank-0.log"));
    log2 += ReadFile(absl::StrCat(cluster.dir(), "/", node, "/jobs/", victim, "/attempt-2/rank-0.log"));
  }
  // The agents run the node checkpoint service (the default): rank 0 hands its
  // last step to it and exits; the service uploads it and the coordinator commits it.
  int64_t committed = EventValue(log1, "preempted", "handed_off_step");
  ASSERT_GE(committed, 3) << log1;
  std::cerr << "victim preempted after committing step " << committed << " of " << steps << "\n";
  // Both ranks of attempt 1 exited 0 (checkpointed within the grace, no SIGKILL).
  std::string agents = ReadFile(cluster.dir() + "/agent-node-a.log") +
                       ReadFile(cluster.dir() + "/agent-node-b.log");
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(agents.find(absl::StrCat("job ", victim, " attempt 1 rank ", r, " exit code 0")),
              std::string::npos)
        << agents;
  }
  EXPECT_EQ(EventValue(log2, "resume", "step"), committed) << log2;
  // `athanor logs --attempt N` serves either attempt; out of range is refused.
  for (int attempt : {1, 2}) {
    CliResult logs = cluster.Cli({"logs", victim, "--rank", "0", "--attempt", std::to_string(attempt)});
    EXPECT_EQ(logs.exit_code, 0) << logs.err;
    EXPECT_EQ(logs.out, PrefixedLines(0, attempt == 1 ? log1 : log2));
  }
  // `athanor job` lists where each attempt ran (both nodes each time) and how it ended.
  CliResult shown = cluster.Cli({"job", victim});
  EXPECT_TRUE(std::regex_search(shown.out, std::regex("attempts: +1 on node-[ab],node-[ab] \\(preempted\\); 2 on "
                                                      "node-[ab],node-[ab] \\(succeeded\\)\n")))
      << shown.out;
  CliResult logs = cluster.Cli({"logs", victim, "--attempt", "3"});
  EXPECT_NE(logs.exit_code, 0);
  EXPECT_NE(logs.err.find("attempt: 3 is not an attempt of job " + victim + " (attempts so far: 2)"),
            std::string::npos)
      << logs.err;
  EXPECT_EQ(ReadFile(resumed), ReadFile(reference)) << "weights differ from the uninterrupted run";
  EXPECT_FALSE(ReadFile(reference).empty());
  SubprocessOptions cmp;
  cmp.argv = {"cmp", reference, resumed};
  auto p = Subprocess::Start(cmp);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait().exit_code, 0);
}

// Runs `argv` to completion with `env` added; its exit code.
int RunToExit(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              const std::string& log) {
  SubprocessOptions o;
  o.argv = argv;
  o.env = env;
  o.stdout_path = log;
  o.stderr_path = "=stdout";
  auto p = Subprocess::Start(o);
  if (!p.ok()) return -1;
  return (*p)->Wait().exit_code;
}

// Two ranks placed by the agents, started by mpirun (through athanor-run, which
// turns OMPI_COMM_WORLD_* into the env contract) and by athanor-run alone train
// bit-for-bit the same weights: the env contract is the only thing that differs.
TEST(PreemptionTrainTest, AgentMpirunAndAthanorRunTrainTheSameWeights) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const std::string bin = std::getenv("ATHANOR_BIN_DIR");
  auto train = [&](const std::string& weights) {
    return std::vector<std::string>{bin + "/athanor-train", "--seed", "9", "--hidden", "48", "--steps", "20",
                                    "--micro-batch", "4", "--accum", "2", "--timeout-s", "20",
                                    "--dump-weights", weights};
  };
  // Every launch pins OpenBLAS's kernels the same way. The agents start ranks
  // with a clean environment, the other launchers pass theirs on, so an
  // OPENBLAS_CORETYPE set on the machine would otherwise reach only some of
  // them (AVX2 kernels here, AVX-512 ones there), and their sums round
  // differently. This test is about the env contract, not the BLAS build.
  const std::map<std::string, std::string> blas = {{"OPENBLAS_CORETYPE", "Haswell"}};
  const std::string by_agent = cluster.dir() + "/agent.safetensors";
  std::vector<std::string> submit = {"submit", "--nodes", "2", "--gpus-per-node", "1",
                                     "--env", "OPENBLAS_CORETYPE=Haswell", "--"};
  for (const std::string& a : train(by_agent)) submit.push_back(a);
  CliResult r = cluster.Cli(submit);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "60"});
  ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << cluster.CoordinatorLog();

  const std::string by_run = cluster.dir() + "/run.safetensors";
  std::vector<std::string> run = {bin + "/athanor-run", "--nproc", "2", "--"};
  for (const std::string& a : train(by_run)) run.push_back(a);
  ASSERT_EQ(RunToExit(run, blas, cluster.dir() + "/run.log"), 0) << ReadFile(cluster.dir() + "/run.log");

  const std::string by_mpirun = cluster.dir() + "/mpirun.safetensors";
  std::vector<std::string> mpirun = {"mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                                     bin + "/athanor-run", "--"};
  for (const std::string& a : train(by_mpirun)) mpirun.push_back(a);
  ASSERT_EQ(RunToExit(mpirun,
                      {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                       {"OPENBLAS_CORETYPE", "Haswell"}},
                      cluster.dir() + "/mpirun.log"),
            0)
      << ReadFile(cluster.dir() + "/mpirun.log");

  const std::string agent_bytes = ReadFile(by_agent);
  ASSERT_FALSE(agent_bytes.empty());
  EXPECT_EQ(ReadFile(by_run), agent_bytes) << "athanor-run and the agent trained different weights";
  EXPECT_EQ(ReadFile(by_mpirun), agent_bytes) << "mpirun and the agent trained different weights";
}

}  // namespace
}  // namespace athanor::testing
