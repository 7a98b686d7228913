#include "checkpoint/restore.h"

#include <gtest/gtest.h>

#include <functional>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "common/crc32c.h"

namespace athanor {
namespace {

using testing_util::FillRankState;
using testing_util::RankState;
using testing_util::RunRanks;
using testing_util::Value;

// Saves `steps` with `world` ranks (threads) into `store`.
void SaveSteps(ObjectStore* store, int world, std::vector<int64_t> steps) {
  InProcessCommitBarrier barrier(world);
  RunRanks(world, [&](int rank) {
    CheckpointerOptions o;
    o.job = "job";
    o.rank = rank;
    o.world_size = world;
    Checkpointer ckpt(store, &barrier, o);
    RankState s;
    for (int64_t step : steps) {
      FillRankState(&s, step, rank, world);
      ASSERT_TRUE(ckpt.Save(step, s.state).ok());
      ASSERT_TRUE(ckpt.Wait().ok());
    }
  });
}

// Restore targets for `rank` of `world`, and a check of their contents.
struct Targets {
  std::vector<float> w = std::vector<float>(20, -1);
  std::vector<float> opt;
  std::vector<TensorRef> refs;
  int rows = 0;
  int rank = 0;
  Targets(int rank_in, int world, int total_rows = 6) : rows(total_rows / world), rank(rank_in) {
    opt.assign(rows * 4, -1);
    refs = {{"w", TensorDType::kF32, {5, 4}, w.data(), w.size() * 4, {}},
            {"opt", TensorDType::kF32, {rows, 4}, opt.data(), opt.size() * 4, ShardSpec{rank * rows, total_rows}}};
  }
  Targets(const Targets&) = delete;  // refs point into this object
  void ExpectStep(int64_t step) const {
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 4; ++c) ASSERT_EQ(w[r * 4 + c], Value(step, 1, r, c)) << r << "," << c;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < 4; ++c) ASSERT_EQ(opt[r * 4 + c], Value(step, 2, rank * rows + r, c)) << r << "," << c;
  }
};

TEST(Restore, SameWorldSizeRestoresTensorsAndMetadata) {
  FakeObjectStore store;
  SaveSteps(&store, 2, {5});
  for (int rank = 0; rank < 2; ++rank) {
    Targets t(rank, 2);
    auto result = Restore(&store, RestoreOptions{"job", rank, 2, nullptr, true}, t.refs);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->step, 5);
    EXPECT_EQ(result->source_world_size, 2);
    EXPECT_EQ(result->metadata.at("rng_state"), "rng-" + std::to_string(rank));
    EXPECT_EQ(result->metadata.at("data_cursor"), "50");
    EXPECT_EQ(result->metadata.at("step"), "5");
    EXPECT_TRUE(result->rejected.empty());
    t.ExpectStep(5);
  }
}

TEST(Restore, TwoWritersLoadIntoThreeReaders) {
  FakeObjectStore store;
  SaveSteps(&store, 2, {7});
  InProcessCommitBarrier agreement(3);
  std::vector<std::unique_ptr<Targets>> targets;
  for (int r = 0; r < 3; ++r) targets.push_back(std::make_unique<Targets>(r, 3));
  std::vector<absl::StatusOr<RestoreResult>> results(3);
  RunRanks(3, [&](int rank) {
    results[rank] = Restore(&store, RestoreOptions{"job", rank, 3, &agreement, false}, targets[rank]->refs);
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    EXPECT_EQ(results[rank]->step, 7);
    EXPECT_EQ(results[rank]->source_world_size, 2);
    targets[rank]->ExpectStep(7);
  }
  // Rank 1 wants rows [2, 4): row 2 from writer 0, row 3 from writer 1.
  EXPECT_EQ(targets[1]->opt[0], Value(7, 2, 2, 0));
  EXPECT_EQ(targets[1]->opt[4], Value(7, 2, 3, 0));
}

TEST(Restore, OneReaderAssemblesTheWholeShardedTensor) {
  FakeObjectStore store;
  SaveSteps(&store, 3, {2});
  Targets t(0, 1);
  auto result = Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, t.refs);
  ASSERT_TRUE(result.ok()) << result.status();
  t.ExpectStep(2);
}

TEST(Restore, ACorruptShardFallsBackToThePreviousCommittedStep) {
  FakeObjectStore store;
  SaveSteps(&store, 1, {1, 2});
  std::string bad = ckpt_layout::ShardKey("job", 2, 0, 1);
  ASSERT_TRUE(store.Corrupt(bad, store.Objects().at(bad).size() - 3));
  Targets t(0, 1);
  auto result = Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, t.refs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 1);
  ASSERT_EQ(result->rejected.size(), 1u);
  EXPECT_NE(result->rejected[0].find(bad), std::string::npos) << result->rejected[0];
  EXPECT_NE(result->rejected[0].find("CRC32C mismatch"), std::string::npos) << result->rejected[0];
  t.ExpectStep(1);
  absl::Status verify = VerifyStep(&store, "job", 2);
  EXPECT_EQ(verify.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(VerifyStep(&store, "job", 1).ok());
}

TEST(Restore, AMissingShardFallsBackAndNamesTheObject) {
  FakeObjectStore store;
  SaveSteps(&store, 2, {1, 2});
  std::string gone = ckpt_layout::ShardKey("job", 2, 1, 2);
  ASSERT_TRUE(store.Delete(gone).ok());
  Targets t(0, 2);
  auto result = Restore(&store, RestoreOptions{"job", 0, 2, nullptr, false}, t.refs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 1);
  ASSERT_EQ(result->rejected.size(), 1u);
  EXPECT_NE(result->rejected[0].find(gone), std::string::npos) << result->rejected[0];
}

TEST(Restore, RanksAgreeOnAStepEvenWhenOnlyOneSeesTheDamage) {
  FakeObjectStore store;
  SaveSteps(&store, 2, {1, 2});
  // Corrupt the sharded tensor in writer 1's shard of step 2: only reader 1
  // of 2 reads it.
  std::string bad = ckpt_layout::ShardKey("job", 2, 1, 2);
  ASSERT_TRUE(store.Corrupt(bad, store.Objects().at(bad).size() - 1));
  InProcessCommitBarrier agreement(2);
  std::vector<std::unique_ptr<Targets>> targets;
  for (int r = 0; r < 2; ++r) targets.push_back(std::make_unique<Targets>(r, 2));
  std::vector<absl::StatusOr<RestoreResult>> results(2);
  RunRanks(2, [&](int rank) {
    results[rank] = Restore(&store, RestoreOptions{"job", rank, 2, &agreement, false}, targets[rank]->refs);
  });
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_EQ(results[0]->step, 1);
  EXPECT_EQ(results[1]->step, 1);
  targets[0]->ExpectStep(1);
  targets[1]->ExpectStep(1);
}

TEST(Restore, UncommittedStepsDoNotExist) {
  FakeObjectStore store;
  SaveSteps(&store, 1, {1});
  ASSERT_TRUE(store.Delete(ckpt_layout::CommitKey("job", 1)).ok());
  Targets t(0, 1);
  auto result = Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, t.refs);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound) << result.status();
}

TEST(Restore, AMismatchedTargetIsTheCallersError) {
  FakeObjectStore store;
  SaveSteps(&store, 1, {1});
  std::vector<double> w(20);
  std::vector<TensorRef> refs = {{"w", TensorDType::kF64, {5, 4}, w.data(), w.size() * 8, {}}};
  EXPECT_EQ(Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, refs).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> x(3);
  refs = {{"nope", TensorDType::kF32, {3}, x.data(), 12, {}}};
  EXPECT_EQ(Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, refs).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Rewrites one tensor entry of a stored manifest and returns the manifest key.
// The CRC32C is recomputed over the new range, and COMMIT's CRC32C of the
// manifest too, so only the size checks can catch the lie.
std::string TamperManifest(FakeObjectStore* store, int64_t step, int rank, int world,
                           const std::string& tensor,
                           const std::function<void(ManifestTensor*)>& change) {
  std::string key = ckpt_layout::ManifestKey("job", step, rank);
  auto m = DecodeManifest(store->Objects().at(key));
  EXPECT_TRUE(m.ok()) << m.status();
  std::string shard = store->Objects().at(ckpt_layout::ShardKey("job", step, rank, world));
  for (ManifestTensor& t : m->tensors) {
    if (t.name != tensor) continue;
    change(&t);
    if (t.offset + t.bytes <= shard.size()) t.crc32c = crc32c::Value(shard.data() + t.offset, t.bytes);
  }
  std::string text = EncodeManifest(*m);
  EXPECT_TRUE(store->Put(key, text, PutMode::kOverwrite).ok());
  {
    std::string commit_key = ckpt_layout::CommitKey("job", step);
    auto commit = DecodeCommit(store->Objects().at(commit_key));
    EXPECT_TRUE(commit.ok()) << commit.status();
    EXPECT_TRUE(commit->shards.at(rank).manifest_crc32c.has_value());
    commit->shards.at(rank).manifest_crc32c = crc32c::Value(text.data(), text.size());
    EXPECT_TRUE(store->Put(commit_key, EncodeCommit(*commit), PutMode::kOverwrite).ok());
  }
  return key;
}

// One bad manifest of step 2 (written by `world` ranks), restored by a lone
// reader: step 2 is rejected with one reason naming what was wrong (and the
// manifest's key where `names_key`), and step 1 is restored instead.
struct BadManifest {
  std::string name;
  int world;
  // Damages step 2 and returns the damaged manifest's key.
  std::function<std::string(FakeObjectStore*)> tamper;
  std::string reason;  // a phrase of the rejection
  bool names_key;
};

class RejectedManifest : public ::testing::TestWithParam<BadManifest> {};

TEST_P(RejectedManifest, FallsBackToThePreviousStepAndSaysWhy) {
  const BadManifest& c = GetParam();
  FakeObjectStore store;
  SaveSteps(&store, c.world, {1, 2});
  const std::string key = c.tamper(&store);
  Targets t(0, 1);
  auto result = Restore(&store, RestoreOptions{"job", 0, 1, nullptr, false}, t.refs);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->step, 1);
  ASSERT_EQ(result->rejected.size(), 1u);
  if (c.names_key) {
    EXPECT_NE(result->rejected[0].find(key), std::string::npos) << result->rejected[0];
  }
  EXPECT_NE(result->rejected[0].find(c.reason), std::string::npos) << result->rejected[0];
  t.ExpectStep(1);
}

INSTANTIATE_TEST_SUITE_P(
    Restore, RejectedManifest,
    ::testing::Values(
        // An edit no shard CRC covers (the restored metadata) that COMMIT's
        // CRC32C of the manifest still catches.
        BadManifest{"NotTheOneCommitted", 1,
                    [](FakeObjectStore* store) {
                      std::string key = ckpt_layout::ManifestKey("job", 2, 0);
                      auto m = DecodeManifest(store->Objects().at(key));
                      EXPECT_TRUE(m.ok()) << m.status();
                      m->metadata["data_cursor"] = "0";
                      EXPECT_TRUE(store->Put(key, EncodeManifest(*m), PutMode::kOverwrite).ok());
                      return key;
                    },
                    "the manifest", true},
        // "w" is [5, 4] f32 (80 bytes); claim 96 so a copy would overrun the
        // target: rejected before any copy.
        BadManifest{"BytesExceedTheShape", 1,
                    [](FakeObjectStore* store) {
                      return TamperManifest(store, 2, 0, 1, "w",
                                            [](ManifestTensor* t) { t->bytes += 16; });
                    },
                    "'w'", true},
        BadManifest{"RangePastTheShard", 1,
                    [](FakeObjectStore* store) {
                      return TamperManifest(store, 2, 0, 1, "w", [](ManifestTensor* t) {
                        t->offset = ~uint64_t{0} - 8;
                      });
                    },
                    "past the end of the shard", true},
        // Writer 1 claims rows [0, 3) as writer 0 does: rows 3..5 are then
        // covered by nobody although the row count adds up.
        BadManifest{"OverlappingShardedPieces", 2,
                    [](FakeObjectStore* store) {
                      return TamperManifest(store, 2, 1, 2, "opt", [](ManifestTensor* t) {
                        t->shard.dim0_offset = 0;
                      });
                    },
                    "overlap", false}),
    [](const ::testing::TestParamInfo<BadManifest>& info) { return info.param.name; });

TEST(Restore, AManifestWhoseBytesFallShortOfTheShapeIsRejected) {
  FakeObjectStore store;
  SaveSteps(&store, 2, {1, 2});
  // Reader 1 of 3 copies rows out of writer 0's "opt" piece; a piece that
  // says 3 rows but holds 16 bytes would be read past its end.
  std::string key = TamperManifest(&store, 2, 0, 2, "opt", [](ManifestTensor* t) { t->bytes = 16; });
  InProcessCommitBarrier agreement(3);
  std::vector<std::unique_ptr<Targets>> targets;
  for (int r = 0; r < 3; ++r) targets.push_back(std::make_unique<Targets>(r, 3));
  std::vector<absl::StatusOr<RestoreResult>> results(3);
  RunRanks(3, [&](int rank) {
    results[rank] = Restore(&store, RestoreOptions{"job", rank, 3, &agreement, false}, targets[rank]->refs);
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << results[rank].status();
    EXPECT_EQ(results[rank]->step, 1);
    targets[rank]->ExpectStep(1);
  }
  ASSERT_FALSE(results[1]->rejected.empty());
  EXPECT_NE(results[1]->rejected[0].find(key), std::string::npos) << results[1]->rejected[0];
}

}  // namespace
}  // namespace athanor
