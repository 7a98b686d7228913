// Checkpoints against a real S3 server: commit through 20% injected faults,
// byte-for-byte cross-checks with s3cmd, and corruption detected on restore.
#include <gtest/gtest.h>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restore.h"
#include "checkpoint/s3/s3_object_store.h"
#include "testing/s3/fault_proxy.h"
#include "testing/s3/s3_test_env.h"

namespace athanor {
namespace {

using testing_s3::Server;

[[maybe_unused]] void* const kEnv = testing_s3::RegisterS3rverEnvironment("ckpt", 150);

std::unique_ptr<S3ObjectStore> MakeStore(int port, const std::string& prefix, const std::string& extra) {
  auto options = ParseS3Options(Server()->UriVia(port, prefix, extra), {});
  EXPECT_TRUE(options.ok()) << options.status();
  return std::make_unique<S3ObjectStore>(*options);
}

// 2.5 MiB of replicated "w" (multipart with 1 MiB parts) and a sharded "opt".
struct State {
  std::vector<float> w;
  std::vector<float> opt;
  TrainingState state;
  State(int64_t step, int rank, int world) : w(655360), opt(8) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(step * 7 + static_cast<int64_t>(i % 1000));
    for (size_t i = 0; i < opt.size(); ++i) opt[i] = static_cast<float>(step * 100 + rank * 8 + static_cast<int64_t>(i));
    state.tensors = {{"w", TensorDType::kF32, {640, 1024}, w.data(), w.size() * 4, {}},
                     {"opt", TensorDType::kF32, {2, 4}, opt.data(), 32, ShardSpec{rank * 2, 2 * world}}};
    state.metadata = {{"data_cursor", std::to_string(step)}};
  }
};

void SaveSteps(ObjectStore* store, int world, const std::vector<int64_t>& steps,
               std::vector<absl::Status>* results) {
  InProcessCommitBarrier barrier(world);
  results->assign(world * steps.size(), absl::OkStatus());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      CheckpointerOptions o;
      o.job = "job";
      o.rank = rank;
      o.world_size = world;
      Checkpointer ckpt(store, &barrier, o);
      for (size_t i = 0; i < steps.size(); ++i) {
        State s(steps[i], rank, world);
        auto started = ckpt.Save(steps[i], s.state);
        (*results)[rank * steps.size() + i] = started.ok() ? ckpt.Wait() : started.status();
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(S3Checkpoint, CommitsThroughTwentyPercentInjectedFaults) {
  ATHANOR_REQUIRE_S3RVER();
  testing_s3::FaultProxyOptions proxy_options;
  proxy_options.upstream_port = Server()->port();
  proxy_options.fault_rate = 0.2;
  proxy_options.seed = 7;
  auto proxy = testing_s3::FaultProxy::Start(proxy_options);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto faulty = MakeStore((*proxy)->port(), "faults",
                          "part_size=1048576&upload_threads=3&max_attempts=12&retry_base_ms=5"
                          "&retry_max_ms=100&low_speed_seconds=1");
  std::vector<absl::Status> results;
  SaveSteps(faulty.get(), 2, {1, 2, 3}, &results);
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;

  auto direct = MakeStore(Server()->port(), "faults", "");
  auto committed = ListCommitted(direct.get(), "job");
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), 3u);
  EXPECT_EQ((*committed)[2].step, 3);
  EXPECT_EQ((*committed)[2].world_size, 2);

  // Restore through the faulty proxy too, into 3 ranks' worth of one reader.
  std::vector<float> w(655360, -1), opt(8, -1);
  std::vector<TensorRef> targets = {{"w", TensorDType::kF32, {640, 1024}, w.data(), w.size() * 4, {}},
                                    {"opt", TensorDType::kF32, {2, 4}, opt.data(), 32, ShardSpec{2, 4}}};
  auto restored = Restore(faulty.get(), RestoreOptions{"job", 1, 2, nullptr, true}, targets);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, 3);
  State want(3, 1, 2);
  EXPECT_TRUE(w == want.w);
  EXPECT_EQ(opt, want.opt);

  (*proxy)->Stop();
  int64_t injected = 0;
  for (const auto& [fault, n] : (*proxy)->faults_injected()) injected += n;
  EXPECT_GT(injected, 0);
  EXPECT_GT(faulty->client()->retries(), 0);
  std::cerr << "fault proxy: " << (*proxy)->requests() << " requests, " << injected
            << " faults injected, " << faulty->client()->retries() << " client retries\n";
}

TEST(S3Checkpoint, S3cmdReadsBackOurObjectsByteForByte) {
  ATHANOR_REQUIRE_S3RVER();
  auto store = MakeStore(Server()->port(), "xcheck", "part_size=1048576");
  std::vector<absl::Status> results;
  SaveSteps(store.get(), 1, {4}, &results);
  ASSERT_TRUE(results[0].ok()) << results[0];
  std::string dir = testing_s3::MakeTempDir("xcheck");
  for (const std::string& key : {ckpt_layout::ShardKey("job", 4, 0, 1), ckpt_layout::CommitKey("job", 4)}) {
    std::string local = dir + "/obj";
    auto out = testing_s3::RunS3cmd(Server()->port(),
                                    {"get", "--force", "s3://ckpt/xcheck/" + key, local});
    ASSERT_TRUE(out.ok()) << out.status();
    auto theirs = testing_s3::ReadFile(local);
    auto ours = store->Get(key, 0, -1);
    ASSERT_TRUE(theirs.ok() && ours.ok());
    EXPECT_EQ(theirs->size(), ours->size()) << key;
    EXPECT_TRUE(*theirs == *ours) << key;
  }
  auto ls = testing_s3::RunS3cmd(Server()->port(), {"ls", "s3://ckpt/xcheck/job/step-0000000004/"});
  ASSERT_TRUE(ls.ok()) << ls.status();
  EXPECT_NE(ls->find("s3://ckpt/xcheck/job/step-0000000004/COMMIT"), std::string::npos) << *ls;
  EXPECT_NE(ls->find("s3://ckpt/xcheck/job/step-0000000004/rank-00000.json"), std::string::npos) << *ls;

  // And the other way: s3cmd writes, we read.
  std::string payload(3000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31);
  ASSERT_TRUE(testing_s3::WriteFile(dir + "/up", payload).ok());
  ASSERT_TRUE(testing_s3::RunS3cmd(Server()->port(), {"put", dir + "/up", "s3://ckpt/xcheck/from-s3cmd"}).ok());
  auto got = store->Get("from-s3cmd", 0, -1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == payload);
  EXPECT_EQ(*store->Get("from-s3cmd", 1000, 10), payload.substr(1000, 10));
}

TEST(S3Checkpoint, AShardCorruptedByAnotherClientIsDetectedOnRestore) {
  ATHANOR_REQUIRE_S3RVER();
  auto store = MakeStore(Server()->port(), "corrupt", "part_size=1048576");
  std::vector<absl::Status> results;
  SaveSteps(store.get(), 1, {1, 2}, &results);
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  std::string key = ckpt_layout::ShardKey("job", 2, 0, 1);
  auto bytes = store->Get(key, 0, -1);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 0x10;
  std::string dir = testing_s3::MakeTempDir("corrupt");
  ASSERT_TRUE(testing_s3::WriteFile(dir + "/bad", *bytes).ok());
  ASSERT_TRUE(testing_s3::RunS3cmd(Server()->port(), {"put", dir + "/bad", "s3://ckpt/corrupt/" + key}).ok());

  std::vector<float> w(655360), opt(2 * 4);
  std::vector<TensorRef> targets = {{"w", TensorDType::kF32, {640, 1024}, w.data(), w.size() * 4, {}},
                                    {"opt", TensorDType::kF32, {2, 4}, opt.data(), 32, ShardSpec{0, 2}}};
  auto restored = Restore(store.get(), RestoreOptions{"job", 0, 1, nullptr, false}, targets);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->step, 1);
  ASSERT_EQ(restored->rejected.size(), 1u);
  EXPECT_NE(restored->rejected[0].find(key), std::string::npos) << restored->rejected[0];
  EXPECT_TRUE(w == State(1, 0, 1).w);
}

}  // namespace
}  // namespace athanor
