// Resuming athanor-train from its checkpoints through athanor-run: after a
// SIGTERM (the ranks agree on a step, checkpoint it, exit 0 naming it; the
// same command then finishes bitwise identical to an uninterrupted run), and
// into a different world size (written by 2 ranks, continued by 3 with the
// same global batch: equal to an uninterrupted run up to reassociation), and
// one --global-batch command run on 3, then 2, then 3 ranks.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/train/train_test_util.h"
#include "worker/train/state_file.h"

namespace athanor::train_test {
namespace {


class CheckpointResumeTest : public RunnerTest {
 protected:
  CheckpointResumeTest() : RunnerTest("ckpt_resume", 100) {}
};

// Reads `fd` until a complete line containing `needle` has arrived; returns
// everything read ("" at EOF first).
std::string ReadUntilLine(int fd, const std::string& needle) {
  std::string buf;
  char chunk[4096];
  while (true) {
    size_t pos = buf.find(needle);
    if (pos != std::string::npos && buf.find('\n', pos) != std::string::npos) return buf;
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    buf.append(chunk, static_cast<size_t>(n));
  }
}

TEST_F(CheckpointResumeTest, SigtermCheckpointsAnAgreedStepAndTheSameCommandFinishesIdentically) {
  const std::string reference = dir_ + "/reference.safetensors";
  const std::string resumed = dir_ + "/resumed.safetensors";
  Output ref = runner_->Run(
      runner_->UnderRun(2, runner_->Train({"--steps", "3000", "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;

  const std::string store = dir_ + "/store";
  const std::vector<std::string> command = runner_->UnderRun(
      2, runner_->Train({"--steps", "3000", "--checkpoint-uri", "file://" + store, "--job-id",
                         "term", "--checkpoint-every", "1000", "--dump-weights", resumed}));
  std::unique_ptr<Subprocess> p = runner_->Start(command);
  ASSERT_NE(p, nullptr);
  std::string head = ReadUntilLine(p->stdout_fd(), "\"step\":20,");
  ASSERT_FALSE(head.empty()) << "the run ended before step 20";
  ASSERT_TRUE(p->Signal(SIGTERM).ok());
  Output first = runner_->Finish(p.get());
  first.out = head + first.out;
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  std::vector<nlohmann::json> preempted = JsonLines(first.out, "preempted");
  ASSERT_EQ(preempted.size(), 1u) << first.out;
  const int64_t step = preempted[0]["committed_step"].get<int64_t>();
  EXPECT_GT(step, 20);
  EXPECT_LT(step, 3000);
  // The agreed step is the last one both ranks ran, and it is committed.
  std::vector<nlohmann::json> steps = JsonLines(first.out, "step");
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back()["step"].get<int64_t>() + 1, step);
  EXPECT_TRUE(absl::StrContains(first.err, absl::StrCat("checkpointed step ", step, "; exiting")))
      << first.err;
  EXPECT_EQ(*CommittedSteps(store, "term").rbegin(), step);

  Output second = runner_->Run(command);
  ASSERT_EQ(second.exit.exit_code, 0) << second.err;
  std::vector<nlohmann::json> resumes = JsonLines(second.out, "resume");
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), step);
  EXPECT_EQ(JsonLines(second.out, "step").front()["step"].get<int64_t>(), step);
  const std::string want = ReadFile(reference);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(want == ReadFile(resumed)) << "final weights differ from the uninterrupted run";
}

TEST_F(CheckpointResumeTest, SkipPolicyKeepsTrainingWhileAnUploadIsInFlight) {
  const std::string store = dir_ + "/store";
  const std::string reference = dir_ + "/reference.safetensors";
  const std::string skipped = dir_ + "/skipped.safetensors";
  Output ref = runner_->Run(
      runner_->UnderRun(2, runner_->Train({"--steps", "300", "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  Output r = runner_->Run(runner_->UnderRun(
      2, runner_->Train({"--steps", "300", "--checkpoint-uri", "file://" + store, "--job-id",
                         "skip", "--checkpoint-every", "1", "--checkpoint-policy", "skip",
                         "--keep", "1000", "--dump-weights", skipped})));
  ASSERT_EQ(r.exit.exit_code, 0) << r.err;
  // Saves happened on the same steps on both ranks (else the commit votes
  // would mismatch and nothing would commit), and the last step is committed.
  std::vector<nlohmann::json> steps = JsonLines(r.out, "step");
  ASSERT_EQ(steps.size(), 300u);
  size_t saves = 0;
  for (const nlohmann::json& s : steps) saves += s["ckpt_stall_ms"].get<double>() > 0 ? 1 : 0;
  const std::set<int64_t> committed = CommittedSteps(store, "skip");
  EXPECT_GE(saves, 1u);
  EXPECT_EQ(committed.size(), saves + 1);  // every staged save plus the final one
  EXPECT_EQ(*committed.rbegin(), 300);
  EXPECT_TRUE(ReadFile(reference) == ReadFile(skipped));
}

TEST_F(CheckpointResumeTest, TwoRankCheckpointContinuesOnThreeRanksWithTheSameGlobalBatch) {
  const std::string store = dir_ + "/store";
  const std::string reference = dir_ + "/reference.safetensors";
  const std::string resharded = dir_ + "/resharded.safetensors";
  // Global batch 12 either way: 2 x 6 and 3 x 4.
  Output ref = runner_->Run(runner_->UnderRun(
      2, runner_->Train({"--steps", "20", "--micro-batch", "6", "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  const std::vector<std::string> ckpt = {"--checkpoint-uri", "file://" + store, "--job-id",
                                         "reshard", "--checkpoint-every", "5"};
  std::vector<std::string> two = runner_->Train({"--steps", "10", "--micro-batch", "6"});
  two.insert(two.end(), ckpt.begin(), ckpt.end());
  Output first = runner_->Run(runner_->UnderRun(2, two));
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  EXPECT_EQ(CommittedSteps(store, "reshard"), (std::set<int64_t>{5, 10}));

  std::vector<std::string> three = runner_->Train(
      {"--steps", "20", "--micro-batch", "4", "--dump-weights", resharded});
  three.insert(three.end(), ckpt.begin(), ckpt.end());
  Output second = runner_->Run(runner_->UnderRun(3, three));
  ASSERT_EQ(second.exit.exit_code, 0) << second.err;
  std::vector<nlohmann::json> resumes = JsonLines(second.out, "resume");
  ASSERT_EQ(resumes.size(), 1u) << second.out;
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), 10);
  EXPECT_EQ(resumes[0]["source_world_size"].get<int>(), 2);
  std::vector<nlohmann::json> steps = JsonLines(second.out, "step");
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_EQ(steps.front()["step"].get<int64_t>(), 10);
  EXPECT_EQ(steps.back()["step"].get<int64_t>(), 19);
  EXPECT_EQ(CommittedSteps(store, "reshard"), (std::set<int64_t>{10, 15, 20}));  // --keep 3

  // `athanor checkpoints` lists them with the world size that wrote each.
  Output listed = runner_->Run({runner_->bin() + "/athanor", "checkpoints", "reshard", "--uri",
                                "file://" + store, "--json"});
  ASSERT_EQ(listed.exit.exit_code, 0) << listed.err;
  nlohmann::json list = nlohmann::json::parse(listed.out);
  ASSERT_EQ(list.size(), 3u) << listed.out;
  const int64_t want_steps[3] = {10, 15, 20};
  const int want_world[3] = {2, 3, 3};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(list[i]["step"].get<int64_t>(), want_steps[i]);
    EXPECT_EQ(list[i]["world_size"].get<int>(), want_world[i]);
    EXPECT_GT(list[i]["total_bytes"].get<uint64_t>(), 0u);
  }

  Weights want, got;
  ASSERT_TRUE(ReadSafetensors(reference, &want).ok());
  ASSERT_TRUE(ReadSafetensors(resharded, &got).ok());
  EXPECT_LT(RelativeMaxDiff(got, want), 1e-5);
}

// The same command at any world size (--global-batch): 3 ranks, then 2 (the
// accumulation goes from 2 to 3), then 3 again, each resuming from the
// newest checkpoint, end where an uninterrupted 3-rank run ends.
TEST_F(CheckpointResumeTest, AGlobalBatchKeptAcrossShrinkAndGrowEndsAsAnUninterruptedRun) {
  const std::string store = dir_ + "/store";
  const std::string reference = dir_ + "/reference.safetensors";
  const std::string resized = dir_ + "/resized.safetensors";
  Output ref = runner_->Run(runner_->UnderRun(
      3, runner_->Train({"--steps", "18", "--micro-batch", "8", "--accum", "2", "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;
  auto elastic = [&](const std::string& steps, const std::vector<std::string>& more) {
    std::vector<std::string> args = runner_->Train({"--steps", steps, "--global-batch", "48", "--micro-batch", "8",
                                                    "--checkpoint-uri", "file://" + store, "--job-id", "elastic",
                                                    "--checkpoint-every", "3"});
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  Output first = runner_->Run(runner_->UnderRun(3, elastic("6", {})));
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  Output shrunk = runner_->Run(runner_->UnderRun(2, elastic("12", {})));
  ASSERT_EQ(shrunk.exit.exit_code, 0) << shrunk.err;
  EXPECT_NE(shrunk.err.find("global batch 48 on 2 rank(s): micro-batch 8 x accumulation 3"), std::string::npos)
      << shrunk.err;
  std::vector<nlohmann::json> resumes = JsonLines(shrunk.out, "resume");
  ASSERT_EQ(resumes.size(), 1u) << shrunk.out;
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), 6);
  EXPECT_EQ(resumes[0]["source_world_size"].get<int>(), 3);
  Output grown = runner_->Run(runner_->UnderRun(3, elastic("18", {"--dump-weights", resized})));
  ASSERT_EQ(grown.exit.exit_code, 0) << grown.err;
  resumes = JsonLines(grown.out, "resume");
  ASSERT_EQ(resumes.size(), 1u) << grown.out;
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), 12);
  EXPECT_EQ(resumes[0]["source_world_size"].get<int>(), 2);

  Weights want, got;
  ASSERT_TRUE(ReadSafetensors(reference, &want).ok());
  ASSERT_TRUE(ReadSafetensors(resized, &got).ok());
  EXPECT_LT(RelativeMaxDiff(got, want), 1e-5);
}

// A global batch that a world size cannot split is refused by every rank
// before training, naming it.
TEST_F(CheckpointResumeTest, AGlobalBatchAWorldCannotSplitIsRefused) {
  Output out = runner_->Run(runner_->UnderRun(
      3, runner_->Train({"--steps", "2", "--global-batch", "50", "--micro-batch", "8"})));
  EXPECT_NE(out.exit.exit_code, 0);
  EXPECT_NE(out.err.find("--global-batch: the global batch of 50 samples cannot be split over 3 ranks (not a multiple)"),
            std::string::npos)
      << out.err;
}

}  // namespace
}  // namespace athanor::train_test
