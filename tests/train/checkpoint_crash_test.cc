// Crash consistency of athanor-train's checkpoints: a 2-rank run over a
// file:// store is SIGKILLed ten times (at a checkpoint's snapshot, shard
// upload and commit through ATHANOR_TEST_CRASH_AT, and at seeded random
// moments through ATHANOR_TEST_CRASH_AFTER_MS), restarted by the same command
// each time, and must end bitwise identical to an uninterrupted run, having
// resumed only from the newest committed step, with nothing orphaned.
#include <unistd.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/train/train_test_util.h"

namespace athanor::train_test {
namespace {

constexpr int kSteps = 300;
constexpr int kKeep = 2;
const char kJob[] = "crashjob";

class CheckpointCrashTest : public RunnerTest {
 protected:
  CheckpointCrashTest() : RunnerTest("ckpt_crash", 110) {}
};

TEST_F(CheckpointCrashTest, TenKillsThenRestartEndsBitwiseIdenticalWithNothingOrphaned) {
  const std::string store = dir_ + "/store";
  const std::string reference = dir_ + "/reference.safetensors";
  const std::string resumed = dir_ + "/resumed.safetensors";
  Output ref = runner_->Run(runner_->UnderRun(
      2, runner_->Train({"--steps", std::to_string(kSteps), "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;

  // The same command every time; only the crash plan in the environment varies.
  const std::vector<std::string> command = runner_->UnderRun(
      2, runner_->Train({"--steps", std::to_string(kSteps), "--checkpoint-uri", "file://" + store,
                         "--job-id", kJob, "--checkpoint-every", "1", "--keep",
                         std::to_string(kKeep), "--dump-weights", resumed}));
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(180, 400), rank(0, 1);
  int killed = 0;
  for (int run = 0; run < 10; ++run) {
    const std::set<int64_t> before = CommittedSteps(store, kJob);
    const int64_t newest = before.empty() ? 0 : *before.rbegin();
    std::map<std::string, std::string> env;
    bool deterministic = true;
    // The four deterministic points first (a random run may get to the end).
    switch (run) {
      case 0: env = {{"ATHANOR_TEST_CRASH_AT", absl::StrCat("snapshot:", newest + 6)}}; break;
      case 1: env = {{"ATHANOR_TEST_CRASH_AT", absl::StrCat("upload:", newest + 6)}}; break;
      case 2: env = {{"ATHANOR_TEST_CRASH_AT", absl::StrCat("commit:", newest + 6)}}; break;
      case 3:
        env = {{"ATHANOR_TEST_CRASH_AT", absl::StrCat("upload:", newest + 6)},
               {"ATHANOR_TEST_CRASH_RANK", "1"}};
        break;
      default:
        deterministic = false;
        env = {{"ATHANOR_TEST_CRASH_AFTER_MS", std::to_string(delay_ms(rng))},
               {"ATHANOR_TEST_CRASH_RANK", std::to_string(rank(rng))}};
    }
    SCOPED_TRACE(absl::StrCat("run ", run, " newest commit before: ", newest));
    std::cerr << "run " << run << ": newest commit " << newest << "\n";
    Output r = runner_->Run(command, env);
    if (deterministic) {
      EXPECT_NE(r.exit.exit_code, 0) << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, "test crash")) << r.err;
    }
    if (r.exit.exit_code != 0) ++killed;
    // Restore picked exactly the newest step that had a COMMIT at the start.
    std::vector<nlohmann::json> resumes = JsonLines(r.out, "resume");
    if (before.empty()) {
      EXPECT_EQ(resumes.size(), 0u) << r.out;
    } else if (!resumes.empty()) {  // a kill before restore finished prints none
      ASSERT_EQ(resumes.size(), 1u) << r.out;
      EXPECT_EQ(resumes[0]["step"].get<int64_t>(), newest);
      EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("resuming from step ", newest, " of file://",
                                                        store, "/", kJob)))
          << r.err;
    }
    const std::set<int64_t> after = CommittedSteps(store, kJob);
    if (!before.empty()) {
      ASSERT_FALSE(after.empty());
      EXPECT_GE(*after.rbegin(), newest);  // commits never go backwards
    }
  }
  EXPECT_GE(killed, 4);

  const int64_t newest = *CommittedSteps(store, kJob).rbegin();
  Output last = runner_->Run(command);
  ASSERT_EQ(last.exit.exit_code, 0) << last.err;
  std::vector<nlohmann::json> resumes = JsonLines(last.out, "resume");
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), newest);
  const std::string want = ReadFile(reference), got = ReadFile(resumed);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(want == got) << "final weights differ from the uninterrupted run";

  // Only committed steps within retention remain, holding only their objects.
  const std::set<int64_t> committed = CommittedSteps(store, kJob);
  EXPECT_EQ(*committed.rbegin(), kSteps);
  EXPECT_LE(committed.size(), static_cast<size_t>(kKeep));
  std::vector<std::string> want_files;
  for (int64_t step : committed) {
    char prefix[64];
    std::snprintf(prefix, sizeof(prefix), "%s/step-%010lld/", kJob, static_cast<long long>(step));
    for (const char* f : {"COMMIT", "rank-00000-of-00002.safetensors", "rank-00000.json",
                          "rank-00001-of-00002.safetensors", "rank-00001.json"}) {
      want_files.push_back(std::string(prefix) + f);
    }
  }
  std::sort(want_files.begin(), want_files.end());
  EXPECT_EQ(ListFiles(store), want_files);
}

}  // namespace
}  // namespace athanor::train_test
