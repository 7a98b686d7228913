// athanor-train with its default flags trains: the loss of the model as
// shipped, and of one 4x wider and twice as deep, falls from its first step's
// log(256) to under 3 in 1,500 steps. Guards the default optimizer, learning
// rate and gradient clipping together. The default data is synthetic (built
// in), so no file is needed.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/train/train_test_util.h"

namespace athanor::train_test {
namespace {

// The runs take about 0.6 s and 2 s on one core; the watchdogs allow for a loaded CI host.
constexpr std::chrono::seconds kRunTimeout{60};

class TrainDefaultsTest : public RunnerTest {
 protected:
  TrainDefaultsTest() : RunnerTest("train_defaults", 150) {}

  // Runs athanor-train with `args` only (stdout to a file, so it prints JSON
  // lines); kills it and fails if it outlives kRunTimeout. Returns the step lines.
  std::vector<nlohmann::json> TrainSteps(const std::string& name,
                                         const std::vector<std::string>& args) {
    SubprocessOptions o;
    o.argv = {runner_->bin() + "/athanor-train"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    // One BLAS thread: the run times stay comparable on a shared 2-core host.
    o.env = {{"OPENBLAS_NUM_THREADS", "1"}};
    o.stdout_path = dir_ + "/" + name + ".out";
    o.stderr_path = dir_ + "/" + name + ".err";
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    std::optional<ExitInfo> exit = (*p)->WaitFor(kRunTimeout);
    if (!exit.has_value()) {
      EXPECT_TRUE((*p)->Signal(SIGKILL).ok());
      (*p)->Wait();
      ADD_FAILURE() << name << ": athanor-train ran past " << kRunTimeout.count() << " s";
      return {};
    }
    EXPECT_EQ(exit->exit_code, 0) << name << ": " << ReadFile(o.stderr_path);
    return JsonLines(ReadFile(o.stdout_path), "step");
  }

  void ExpectLossFalls(const std::string& name, const std::vector<std::string>& args) {
    std::vector<nlohmann::json> steps = TrainSteps(name, args);
    ASSERT_EQ(steps.size(), 1500u) << name;
    for (size_t i = 0; i < steps.size(); ++i) {
      ASSERT_EQ(steps[i]["step"].get<int64_t>(), static_cast<int64_t>(i)) << name;
    }
    const double first = steps.front()["loss"].get<double>();
    const double last = steps.back()["loss"].get<double>();
    // Untrained: close to uniform over 256 bytes.
    EXPECT_NEAR(first, std::log(256.0), 0.1) << name;
    EXPECT_LT(last, 3.0) << name << ": loss " << first << " -> " << last;
    EXPECT_LT(last, first) << name;
  }
};

TEST_F(TrainDefaultsTest, DefaultFlagsTrain) { ExpectLossFalls("default", {"--steps", "1500"}); }

TEST_F(TrainDefaultsTest, DefaultFlagsTrainAWiderDeeperModel) {
  ExpectLossFalls("wide", {"--steps", "1500", "--hidden", "512", "--layers", "2"});
}

}  // namespace
}  // namespace athanor::train_test
