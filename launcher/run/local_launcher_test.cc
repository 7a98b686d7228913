// Runs the athanor-run binary on small shell commands.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

struct Result {
  ExitInfo exit;
  std::vector<std::string> out;  // sorted stdout lines
  std::string err;
};

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alarm(50);  // watchdog: a hang kills the test binary
    const char* bin = std::getenv("ATHANOR_BIN_DIR");
    ASSERT_NE(bin, nullptr) << "ATHANOR_BIN_DIR not set (run through ctest)";
    run_ = std::string(bin) + "/athanor-run";
    err_path_ = ::testing::TempDir() + "/run_test_stderr_" + std::to_string(getpid());
  }
  void TearDown() override {
    alarm(0);
    std::remove(err_path_.c_str());
  }

  std::unique_ptr<Subprocess> Start(std::vector<std::string> args) {
    SubprocessOptions o;
    o.argv = {run_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.capture_stdout = true;
    std::remove(err_path_.c_str());
    o.stderr_path = err_path_;
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }

  Result Finish(Subprocess* p) {
    Result r;
    for (absl::string_view line : absl::StrSplit(p->ReadAllStdout(), '\n', absl::SkipEmpty())) {
      r.out.emplace_back(line);
    }
    std::sort(r.out.begin(), r.out.end());
    r.exit = p->Wait();
    std::ifstream in(err_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
  }

  Result Run(std::vector<std::string> args) { return Finish(Start(std::move(args)).get()); }

  std::string run_, err_path_;
};

TEST_F(RunTest, SetsTheEnvContractAndPrefixesLines) {
  Result r = Run({"--nproc", "3", "--job-id", "j7", "--", "sh", "-c",
                  "echo \"$RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $NODE_RANK "
                  "$MASTER_ADDR $ATHANOR_JOB_ID\"; echo to-stderr >&2; "
                  "test \"$MASTER_PORT\" -gt 0"});
  EXPECT_EQ(r.exit.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            (std::vector<std::string>{"[0] 0/3 0/3 0 127.0.0.1 j7", "[1] 1/3 1/3 0 127.0.0.1 j7",
                                      "[2] 2/3 2/3 0 127.0.0.1 j7"}));
  for (int k = 0; k < 3; ++k) {
    EXPECT_NE(r.err.find(absl::StrCat("[", k, "] to-stderr\n")), std::string::npos) << r.err;
  }
}

TEST_F(RunTest, AFailingRankEndsTheOthersWithItsExitCode) {
  // Rank 1 fails; rank 0 ignores SIGTERM so only the SIGKILL after the grace ends it.
  Result r = Run({"--nproc", "3", "--grace-s", "0.2", "--", "sh", "-c",
                  "if [ $RANK = 1 ]; then exit 7; fi; "
                  "if [ $RANK = 0 ]; then trap '' TERM; fi; "
                  "while :; do sleep 1; done"});
  EXPECT_EQ(r.exit.exit_code, 7) << r.err;
  EXPECT_NE(r.err.find("rank 1 failed (exit code 7)"), std::string::npos) << r.err;
}

TEST_F(RunTest, AKilledRankIsReportedWithItsSignal) {
  Result r = Run({"--nproc", "2", "--", "sh", "-c",
                  "if [ $RANK = 1 ]; then kill -9 $$; fi; while :; do sleep 1; done"});
  EXPECT_EQ(r.exit.exit_code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("rank 1 failed (killed by signal 9"), std::string::npos) << r.err;
}

TEST_F(RunTest, ForwardsSigtermToEveryRank) {
  std::unique_ptr<Subprocess> p =
      Start({"--nproc", "2", "--", "sh", "-c",
             "trap 'echo term $RANK; exit 3' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_NE(p, nullptr);
  // Wait (on the pipe, no sleeps) until both ranks said ready.
  std::string seen;
  char buf[256];
  while (std::count(seen.begin(), seen.end(), '\n') < 2) {
    ssize_t n = read(p->stdout_fd(), buf, sizeof(buf));
    ASSERT_GT(n, 0);
    seen.append(buf, n);
  }
  ASSERT_EQ(kill(p->pid(), SIGTERM), 0);
  Result r = Finish(p.get());
  EXPECT_EQ(r.exit.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, (std::vector<std::string>{"[0] term 0", "[1] term 1"}));
  EXPECT_NE(r.err.find("forwarding to all ranks"), std::string::npos) << r.err;
}

TEST_F(RunTest, RejectsAMissingCommand) {
  Result r = Run({"--nproc", "2"});
  EXPECT_EQ(r.exit.exit_code, 127);
  EXPECT_NE(r.err.find("no command"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace athanor
