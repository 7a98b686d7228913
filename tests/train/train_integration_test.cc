// End-to-end training runs through the real binaries: athanor-run with the
// ucx backend, mpirun (directly and through athanor-run), fault handling,
// fp16 overflow skipping, and loss curves on a real text file.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/train/train_test_util.h"
#include "worker/train/state_file.h"

namespace athanor {
namespace {

using train_test::RelativeMaxDiff;
using train_test::Weights;


struct Output {
  ExitInfo exit;
  std::string out, err;
};

class TrainIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alarm(100);  // watchdog: a hang fails the binary instead of the CI job
    const char* bin = std::getenv("ATHANOR_BIN_DIR");
    ASSERT_NE(bin, nullptr) << "ATHANOR_BIN_DIR not set (run through ctest)";
    bin_ = bin;
    dir_ = ::testing::TempDir() + "/train_it_" + std::to_string(getpid());
    ASSERT_EQ(system(("mkdir -p " + dir_).c_str()), 0);
  }
  void TearDown() override {
    alarm(0);
    (void)system(("rm -rf " + dir_).c_str());
  }

  std::vector<std::string> Train(std::vector<std::string> args) {
    std::vector<std::string> argv = {bin_ + "/athanor-train",
                                     "--seed",
                                     "5",
                                     "--hidden",
                                     "48",
                                     "--lr",
                                     "0.05",
                                     "--bucket-mb",
                                     "0.05",
                                     "--first-bucket-mb",
                                     "0.01"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  std::vector<std::string> UnderRun(int n, std::vector<std::string> argv) {
    std::vector<std::string> out = {bin_ + "/athanor-run", "--nproc", std::to_string(n), "--"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  std::vector<std::string> UnderMpirun(int n, std::vector<std::string> argv) {
    std::vector<std::string> out = {
        "mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
        "-np",    std::to_string(n)};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  std::unique_ptr<Subprocess> Start(const std::vector<std::string>& argv) {
    SubprocessOptions o;
    o.argv = argv;
    o.capture_stdout = true;
    o.stderr_path = dir_ + "/stderr";
    std::remove(o.stderr_path.c_str());
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }
  Output Finish(Subprocess* p) {
    Output r;
    r.out = p->ReadAllStdout();
    r.exit = p->Wait();
    std::ifstream in(dir_ + "/stderr");
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
  }
  Output Run(const std::vector<std::string>& argv) { return Finish(Start(argv).get()); }

  Weights RunAndLoad(std::vector<std::string> argv, const std::string& name) {
    const std::string path = dir_ + "/" + name + ".safetensors";
    argv.push_back("--dump-weights");
    argv.push_back(path);
    Output r = Run(argv);
    EXPECT_EQ(r.exit.exit_code, 0) << r.err;
    Weights w;
    EXPECT_TRUE(ReadSafetensors(path, &w).ok());
    return w;
  }

  std::string bin_, dir_;
};

// Step lines as JSON (optionally only those of one "[r] " prefix).
std::vector<nlohmann::json> Steps(const std::string& out, const std::string& prefix = "") {
  std::vector<nlohmann::json> steps;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (!prefix.empty()) {
      if (!absl::ConsumePrefix(&line, prefix)) continue;
    }
    if (line.empty() || line[0] != '{') continue;
    steps.push_back(nlohmann::json::parse(std::string(line)));
  }
  return steps;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(TrainIntegrationTest, FactorisationsAndLaunchersTrainTheSameWeights) {
  const std::vector<std::string> sgd = {"--steps", "20", "--optimizer", "sgd"};
  const std::vector<std::string> two_by_two =
      Train(Concat(sgd, {"--micro-batch", "8", "--accum", "2"}));
  Weights two = RunAndLoad(UnderRun(2, two_by_two), "two");
  Weights again = RunAndLoad(UnderRun(2, two_by_two), "again");
  Weights acc4 = RunAndLoad(Train(Concat(sgd, {"--micro-batch", "8", "--accum", "4"})), "acc4");
  Weights big = RunAndLoad(Train(Concat(sgd, {"--micro-batch", "32", "--accum", "1"})), "big");
  ASSERT_EQ(two.size(), 5u);  // out.weight, out.bias, hidden.0.weight, hidden.0.bias, embed.weight
  EXPECT_EQ(two, again) << "the same command must give bitwise-identical weights";
  EXPECT_LE(RelativeMaxDiff(two, acc4), 1e-5);
  EXPECT_LE(RelativeMaxDiff(big, acc4), 1e-5);
  EXPECT_GT(RelativeMaxDiff(big, RunAndLoad(Train({"--steps", "0"}), "init")), 1e-3);

  // mpirun -np 2 athanor-run -- athanor-train: same contract and backend, same bits.
  Weights via_mpirun_run =
      RunAndLoad(UnderMpirun(2, Concat({bin_ + "/athanor-run", "--"}, two_by_two)), "mpirun_run");
  EXPECT_EQ(via_mpirun_run, two);
}

TEST_F(TrainIntegrationTest, MpirunAloneUsesTheMpiBackend) {
  const std::vector<std::string> argv =
      Train({"--steps", "20", "--optimizer", "sgd", "--micro-batch", "8", "--accum", "2"});
  const std::string path = dir_ + "/mpi.safetensors";
  Output r = Run(UnderMpirun(2, Concat(argv, {"--dump-weights", path})));
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("using the mpi backend"), std::string::npos) << r.err;
  Weights mpi, ucx = RunAndLoad(UnderRun(2, argv), "ucx");
  ASSERT_TRUE(ReadSafetensors(path, &mpi).ok());
  EXPECT_LE(RelativeMaxDiff(mpi, ucx), 1e-5);
}

TEST_F(TrainIntegrationTest, MpirunWithAnExplicitTcpBackendExplainsWhatToDo) {
  Output r = Run(UnderMpirun(2, Train({"--steps", "1", "--backend", "ucx"})));
  EXPECT_NE(r.exit.exit_code, 0);
  EXPECT_NE(r.err.find("mpirun -np N athanor-run -- athanor-train"), std::string::npos) << r.err;
}

TEST_F(TrainIntegrationTest, AKilledRankEndsTheOthersAndIsNamed) {
  // Rank 1 prints its pid (exec keeps it) so the test can kill exactly that process.
  const std::vector<std::string> train = Train({"--steps", "100000000"});
  std::string cmd = "echo pid $$; exec";
  for (const std::string& a : train) cmd += " '" + a + "'";
  std::unique_ptr<Subprocess> p = Start(UnderRun(2, {"sh", "-c", cmd}));
  ASSERT_NE(p, nullptr);
  std::string seen;
  pid_t rank1 = -1;
  bool training = false;
  char buf[4096];
  while (rank1 < 0 || !training) {  // waits on the pipe; the watchdog bounds it
    ssize_t n = read(p->stdout_fd(), buf, sizeof(buf));
    ASSERT_GT(n, 0) << seen;
    seen.append(buf, n);
    const size_t at = seen.find("[1] pid ");
    if (at != std::string::npos && seen.find('\n', at) != std::string::npos) {
      rank1 = std::atoi(seen.c_str() + at + 8);
    }
    training = seen.find("[0] {\"step\":1,") != std::string::npos;
  }
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  Output r = Finish(p.get());
  EXPECT_EQ(r.exit.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("rank 1 failed (killed by signal 9"), std::string::npos) << r.err;
}

TEST_F(TrainIntegrationTest, SigtermStopsEveryRankAfterTheSameStep) {
  std::unique_ptr<Subprocess> p =
      Start(UnderRun(3, Train({"--steps", "100000000", "--all-ranks-log"})));
  ASSERT_NE(p, nullptr);
  std::string seen;
  char buf[4096];
  while (seen.find("[2] {\"rank\":2,\"step\":2,") == std::string::npos) {  // all ranks are training
    ssize_t n = read(p->stdout_fd(), buf, sizeof(buf));
    ASSERT_GT(n, 0) << seen;
    seen.append(buf, n);
  }
  ASSERT_EQ(kill(p->pid(), SIGTERM), 0);  // athanor-run forwards it to every rank
  Output r = Finish(p.get());
  r.out = seen + r.out;
  EXPECT_EQ(r.exit.exit_code, 0) << r.err;
  int64_t last = -1;
  for (const std::string prefix : {"[0] ", "[1] ", "[2] "}) {
    std::vector<nlohmann::json> steps = Steps(r.out, prefix);
    ASSERT_FALSE(steps.empty());
    if (last < 0) last = steps.back()["step"].get<int64_t>();
    EXPECT_EQ(steps.back()["step"].get<int64_t>(), last) << prefix;
  }
  EXPECT_NE(r.err.find(absl::StrCat("stopping after step ", last, " as requested")),
            std::string::npos)
      << r.err;
}

TEST_F(TrainIntegrationTest, ResumingFromSavedStateGivesTheSameWeights) {
  const std::vector<std::string> opts = {"--optimizer",   "adamw", "--precision", "bf16",
                                         "--micro-batch", "8",     "--accum",     "2"};
  Weights straight = RunAndLoad(UnderRun(2, Train(Concat(opts, {"--steps", "12"}))), "straight");
  const std::string state = dir_ + "/state.safetensors";
  Output half = Run(UnderRun(2, Train(Concat(opts, {"--steps", "5", "--save-state", state}))));
  ASSERT_EQ(half.exit.exit_code, 0) << half.err;
  Weights resumed = RunAndLoad(
      UnderRun(2, Train(Concat(opts, {"--steps", "12", "--resume-from", state}))), "resumed");
  EXPECT_EQ(resumed, straight);
}

TEST_F(TrainIntegrationTest, Fp16OverflowSkipsExactlyThatStepOnEveryRank) {
  Output r =
      Run(UnderRun(2, Train({"--steps", "6", "--precision", "fp16", "--all-ranks-log",
                             "--inject-overflow-step", "3", "--inject-overflow-rank", "1"})));
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  for (const std::string prefix : {"[0] ", "[1] "}) {
    std::vector<nlohmann::json> steps = Steps(r.out, prefix);
    ASSERT_EQ(steps.size(), 6u) << r.out;
    for (int s = 0; s < 6; ++s) {
      EXPECT_EQ(steps[s]["step"], s);
      EXPECT_EQ(steps[s]["skipped"], s == 3) << prefix << s;
      EXPECT_EQ(steps[s]["loss_scale"], s <= 3 ? 65536.0 : 32768.0) << prefix << s;
    }
  }
}

TEST_F(TrainIntegrationTest, LossFallsOnRealTextInEveryPrecision) {
  const std::string text = "/usr/share/common-licenses/GPL-3";
  ASSERT_EQ(access(text.c_str(), R_OK), 0) << text << " is missing (Debian's base-files has it)";
  std::map<std::string, double> final_loss;
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    Output r =
        Run({bin_ + "/athanor-train", "--data", text, "--steps", "500", "--micro-batch", "64",
             "--hidden", "64", "--optimizer", "adamw", "--lr", "0.003", "--precision", precision});
    ASSERT_EQ(r.exit.exit_code, 0) << r.err;
    std::vector<nlohmann::json> steps = Steps(r.out);
    ASSERT_EQ(steps.size(), 500u);
    const double first = steps[0]["loss"].get<double>();
    double tail = 0;  // mean of the last 50 steps: single steps are noisy
    for (int s = 450; s < 500; ++s) tail += steps[s]["loss"].get<double>() / 50;
    EXPECT_NEAR(first, std::log(256.0), 0.1) << precision;
    EXPECT_LE(tail, 0.6 * first) << precision << ": loss must fall by at least 40%";
    final_loss[precision] = tail;
  }
  EXPECT_NEAR(final_loss["bf16"], final_loss["fp32"], 0.05 * final_loss["fp32"]);
  EXPECT_NEAR(final_loss["fp16"], final_loss["fp32"], 0.05 * final_loss["fp32"]);
}

}  // namespace
}  // namespace athanor
