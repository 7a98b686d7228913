#include "worker/train/checkpointing.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/layout.h"
#include "gtest/gtest.h"
#include "worker/train/testing/thread_communicator.h"
#include "worker/train/train_flags.h"

namespace athanor {
namespace {

// Runs AllDurable on 3 thread-ranks with per-rank (step, vote).
std::vector<absl::StatusOr<bool>> Vote(ThreadWorld* world, const std::vector<int64_t>& steps,
                                       const std::vector<bool>& votes) {
  std::vector<absl::StatusOr<bool>> out(steps.size(), absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(steps.size()); ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = world->Join(r);
      CommunicatorCommitBarrier barrier(comm.get(), kCheckpointCommitTag, std::chrono::seconds(10));
      out[r] = barrier.AllDurable(steps[r], votes[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(CommunicatorCommitBarrierTest, TrueOnlyWhenEveryRankIsDurableForTheSameStep) {
  ThreadWorld world(3);
  for (const absl::StatusOr<bool>& r : Vote(&world, {7, 7, 7}, {true, true, true})) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r);
  }
  for (const absl::StatusOr<bool>& r : Vote(&world, {8, 8, 8}, {true, false, true})) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(*r);
  }
  for (const absl::StatusOr<bool>& r : Vote(&world, {9, 9, 10}, {true, true, true})) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(CommunicatorCommitBarrierTest, AWorldOfOneReturnsItsOwnVote) {
  CommunicatorCommitBarrier barrier(nullptr, kCheckpointCommitTag, std::chrono::seconds(1));
  EXPECT_EQ(*barrier.AllDurable(3, true), true);
  EXPECT_EQ(*barrier.AllDurable(4, false), false);
}

EnvLookup LookupIn(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(CrashPlanTest, UnsetOrEmptyVariablesMeanNoCrash) {
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {},
           {{"ATHANOR_TEST_CRASH_AT", ""},
            {"ATHANOR_TEST_CRASH_RANK", ""},
            {"ATHANOR_TEST_CRASH_AFTER_MS", ""}}}) {
    absl::StatusOr<CrashPlan> none = CrashPlanFromEnv(LookupIn(vars));
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_EQ(none->point, CrashPoint::kNone);
    EXPECT_EQ(none->step, -1);
    EXPECT_EQ(none->rank, 0);
    EXPECT_EQ(none->after_ms, -1);
  }
}

TEST(CrashPlanTest, ReadsEachVariable) {
  absl::StatusOr<CrashPlan> upload = CrashPlanFromEnv(
      LookupIn({{"ATHANOR_TEST_CRASH_AT", "upload:42"}, {"ATHANOR_TEST_CRASH_RANK", "1"}}));
  ASSERT_TRUE(upload.ok()) << upload.status();
  EXPECT_EQ(upload->point, CrashPoint::kUpload);
  EXPECT_EQ(upload->step, 42);
  EXPECT_EQ(upload->rank, 1);
  EXPECT_EQ(upload->after_ms, -1);
  absl::StatusOr<CrashPlan> later = CrashPlanFromEnv(
      LookupIn({{"ATHANOR_TEST_CRASH_AFTER_MS", "2500"}, {"ATHANOR_TEST_CRASH_RANK", "2"}}));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->point, CrashPoint::kNone);
  EXPECT_EQ(later->after_ms, 2500);
  EXPECT_EQ(later->rank, 2);
  absl::StatusOr<CrashPlan> snapshot =
      CrashPlanFromEnv(LookupIn({{"ATHANOR_TEST_CRASH_AT", "snapshot:0"}}));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->point, CrashPoint::kSnapshot);
  EXPECT_EQ(snapshot->step, 0);
  absl::StatusOr<CrashPlan> commit =
      CrashPlanFromEnv(LookupIn({{"ATHANOR_TEST_CRASH_AT", "commit:7"}}));
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(commit->point, CrashPoint::kCommit);
  EXPECT_EQ(commit->step, 7);
}

// A malformed value is an error that names its variable and repeats the
// value, never a silent 0.
TEST(CrashPlanTest, MalformedValuesNameTheirVariable) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"ATHANOR_TEST_CRASH_AT", "compute:3"},   {"ATHANOR_TEST_CRASH_AT", "commit"},
      {"ATHANOR_TEST_CRASH_AT", "upload:x"},    {"ATHANOR_TEST_CRASH_AT", "upload:-1"},
      {"ATHANOR_TEST_CRASH_AT", "upload:4:5"},  {"ATHANOR_TEST_CRASH_RANK", "one"},
      {"ATHANOR_TEST_CRASH_RANK", "-1"},        {"ATHANOR_TEST_CRASH_RANK", "1x"},
      {"ATHANOR_TEST_CRASH_AFTER_MS", "soon"},  {"ATHANOR_TEST_CRASH_AFTER_MS", "-5"},
      {"ATHANOR_TEST_CRASH_AFTER_MS", "99999999999999999999"}};
  for (const auto& [name, value] : bad) {
    absl::Status s = CrashPlanFromEnv(LookupIn({{name, value}})).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
    EXPECT_NE(s.message().find("'" + value + "'"), std::string::npos) << s;
  }
}

TEST(TrainFlagsTest, CheckpointFlagsAndTheirEnvironmentDefaults) {
  setenv("ATHANOR_CHECKPOINT_URI", "file:///ckpt", 1);
  setenv("ATHANOR_JOB_ID", "job7", 1);
  TrainFlags from_env;
  const char* plain[] = {"athanor-train"};
  ASSERT_TRUE(ParseTrainFlags(1, plain, &from_env).ok());
  EXPECT_EQ(from_env.checkpoint_uri, "file:///ckpt");
  EXPECT_EQ(from_env.job_id, "job7");
  EXPECT_EQ(from_env.keep, 3);
  EXPECT_EQ(from_env.checkpoint_every, 0);
  EXPECT_FALSE(from_env.checkpoint_skip);
  unsetenv("ATHANOR_CHECKPOINT_URI");
  unsetenv("ATHANOR_JOB_ID");

  TrainFlags given;
  const char* argv[] = {"athanor-train", "--checkpoint-uri", "s3://b/p", "--checkpoint-every",
                        "5", "--job-id", "j", "--keep", "2", "--checkpoint-policy", "skip"};
  ASSERT_TRUE(ParseTrainFlags(11, argv, &given).ok());
  EXPECT_EQ(given.checkpoint_uri, "s3://b/p");
  EXPECT_EQ(given.checkpoint_every, 5);
  EXPECT_EQ(given.job_id, "j");
  EXPECT_EQ(given.keep, 2);
  EXPECT_TRUE(given.checkpoint_skip);

  TrainFlags defaults;
  ASSERT_TRUE(ParseTrainFlags(1, plain, &defaults).ok());
  EXPECT_EQ(defaults.checkpoint_uri, "");
  EXPECT_EQ(defaults.job_id, "local");
  TrainFlags bad;
  const char* bad_policy[] = {"athanor-train", "--checkpoint-policy", "later"};
  EXPECT_EQ(ParseTrainFlags(3, bad_policy, &bad).code(), absl::StatusCode::kInvalidArgument);
  const char* bad_keep[] = {"athanor-train", "--keep", "0"};
  EXPECT_EQ(ParseTrainFlags(3, bad_keep, &bad).code(), absl::StatusCode::kInvalidArgument);
}

TrainerOptions Small() {
  TrainerOptions o;
  o.model.context = 4;
  o.model.embed = 8;
  o.model.hidden = 32;
  o.optimizer.kind = "adamw";
  o.optimizer.lr = 0.01f;
  o.seed = 3;
  return o;
}

class TrainerCheckpointTest : public ::testing::Test {
 protected:
  std::unique_ptr<Trainer> NewTrainer() {
    absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(Small(), &data_, nullptr);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  }
  // Trains `steps` steps and commits the result as a checkpoint of job "t".
  std::unique_ptr<Trainer> TrainAndCommit(int steps) {
    std::unique_ptr<Trainer> t = NewTrainer();
    for (int i = 0; i < steps; ++i) EXPECT_TRUE(t->Step().ok());
    InProcessCommitBarrier barrier(1);
    CheckpointerOptions o;
    o.job = "t";
    Checkpointer ckpt(&store_, &barrier, o);
    EXPECT_TRUE(ckpt.Save(t->step(), TrainerCheckpointState(*t)).ok());
    EXPECT_TRUE(ckpt.Wait().ok());
    return t;
  }
  TextDataset data_ = TextDataset::FromString(SyntheticText(20000), 4);
  FakeObjectStore store_;
};

TEST_F(TrainerCheckpointTest, ARestoredTrainerContinuesBitwiseIdentically) {
  std::unique_ptr<Trainer> original = TrainAndCommit(3);
  std::unique_ptr<Trainer> restored = NewTrainer();
  absl::StatusOr<std::optional<RestoreResult>> r =
      RestoreTrainer(&store_, "t", nullptr, restored.get());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->step, 3);
  EXPECT_EQ((*r)->metadata.at("rng_state"), "seed=3;step=3");
  EXPECT_EQ((*r)->metadata.at("optimizer_steps"), "3");
  EXPECT_EQ(restored->step(), 3);
  EXPECT_EQ(restored->params(), original->params());
  ASSERT_TRUE(original->Step().ok());
  ASSERT_TRUE(restored->Step().ok());
  EXPECT_EQ(restored->params(), original->params());
}

TEST_F(TrainerCheckpointTest, NoCommittedStepIsAFreshStart) {
  std::unique_ptr<Trainer> t = NewTrainer();
  absl::StatusOr<std::optional<RestoreResult>> r = RestoreTrainer(&store_, "t", nullptr, t.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(t->step(), 0);
}

TEST_F(TrainerCheckpointTest, CommittedStepsThatAllFailToLoadAreAnError) {
  TrainAndCommit(2);
  const std::string shard = ckpt_layout::ShardKey("t", 2, 0, 1);
  absl::StatusOr<std::string> bytes = store_.Get(shard, 0, -1);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 1] ^= 1;
  ASSERT_TRUE(store_.Put(shard, *bytes, PutMode::kOverwrite).ok());
  std::unique_ptr<Trainer> t = NewTrainer();
  EXPECT_EQ(RestoreTrainer(&store_, "t", nullptr, t.get()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TrainerCheckpointTest, DecommitDeletesOnlyNewerCommits) {
  TrainAndCommit(2);
  TrainAndCommit(4);
  TrainAndCommit(6);
  ASSERT_TRUE(DecommitNewerSteps(&store_, "t", 2).ok());
  EXPECT_TRUE(store_.Head(ckpt_layout::CommitKey("t", 2)).ok());
  EXPECT_EQ(store_.Head(ckpt_layout::CommitKey("t", 4)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Head(ckpt_layout::CommitKey("t", 6)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_.Head(ckpt_layout::ShardKey("t", 6, 0, 1)).ok());  // data kept
}

}  // namespace
}  // namespace athanor
