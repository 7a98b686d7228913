// Helpers for the checkpoint tests that run athanor-train under athanor-run:
// process start/finish with captured output, JSON event lines, a store
// directory scan, and byte-exact file reads. Single-threaded (a test's
// thread). Paths come from ATHANOR_BIN_DIR (set by ctest).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace athanor::train_test {

struct Output {
  ExitInfo exit;
  std::string out, err;
};

// The whole file ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// JSON objects among the output lines (an athanor-run "[r] " prefix is
// stripped; lines not starting with '{' are skipped). With `event`, only the
// objects whose "event" equals it; with event == "step", those with "step"
// and no "event".
std::vector<nlohmann::json> JsonLines(const std::string& out, const std::string& event);

// Every regular file below `root`, relative to it, sorted.
std::vector<std::string> ListFiles(const std::string& root);
// Steps of `job` with a COMMIT file in a file:// store rooted at `root`.
std::set<int64_t> CommittedSteps(const std::string& root, const std::string& job);

// Tensor name -> f32 values, as loaded from a --dump-weights file.
using Weights = std::map<std::string, std::vector<float>>;

// Largest |a - b| over every element, divided by the largest |b| (expects equal
// names and sizes, as a test failure otherwise).
double RelativeMaxDiff(const Weights& a, const Weights& b);

class Runner {
 public:
  // `dir` is a scratch directory for stderr files.
  Runner(std::string bin, std::string dir) : bin_(std::move(bin)), dir_(std::move(dir)) {}
  const std::string& bin() const { return bin_; }

  // athanor-train with the small model every test uses (sgd at lr 0.05, and
  // the default gradient clipping), then `extra`.
  std::vector<std::string> Train(const std::vector<std::string>& extra) const;
  // athanor-run --nproc n -- argv
  std::vector<std::string> UnderRun(int n, const std::vector<std::string>& argv) const;

  std::unique_ptr<Subprocess> Start(const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& env = {});
  Output Finish(Subprocess* p);
  Output Run(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {});

 private:
  const std::string bin_, dir_;
  int runs_ = 0;
};

// A scratch directory per test and a Runner over ATHANOR_BIN_DIR, with an
// alarm() watchdog so a hang kills the binary instead of the CI job.
class RunnerTest : public ::testing::Test {
 protected:
  RunnerTest(std::string name, unsigned watchdog_seconds)
      : name_(std::move(name)), watchdog_seconds_(watchdog_seconds) {}
  void SetUp() override;
  void TearDown() override;

  std::string dir_;
  std::unique_ptr<Runner> runner_;

 private:
  const std::string name_;
  const unsigned watchdog_seconds_;
};

}  // namespace athanor::train_test
