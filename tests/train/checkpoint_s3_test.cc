// athanor-train checkpointing to a real S3 server (s3rver) through a proxy
// that fails 20% of requests (503 SlowDown or a connection reset): every
// checkpoint still commits; then a shard corrupted on purpose is detected on
// restore, and the run resumes from the previous committed step, with a
// warning naming the object, and ends bitwise identical to an uninterrupted
// run.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/builtin_stores.h"
#include "checkpoint/catalog.h"
#include "checkpoint/layout.h"
#include "checkpoint/object_store.h"
#include "gtest/gtest.h"
#include "testing/s3/fault_proxy.h"
#include "testing/s3/s3_test_env.h"
#include "tests/train/train_test_util.h"

namespace athanor::train_test {
namespace {

using testing_s3::Server;

[[maybe_unused]] void* const kEnv = testing_s3::RegisterS3rverEnvironment("trainckpt", 110);

const char kJob[] = "s3job";

std::vector<int64_t> Committed(ObjectStore* store) {
  absl::StatusOr<std::vector<CommittedStep>> steps = ListCommitted(store, kJob);
  EXPECT_TRUE(steps.ok()) << steps.status();
  std::vector<int64_t> out;
  if (steps.ok()) {
    for (const CommittedStep& s : *steps) out.push_back(s.step);
  }
  return out;
}

TEST(CheckpointS3Test, CommitsThroughFaultsAndResumesPastACorruptShard) {
  ATHANOR_REQUIRE_S3RVER();
  const char* bin = std::getenv("ATHANOR_BIN_DIR");
  ASSERT_NE(bin, nullptr) << "ATHANOR_BIN_DIR not set (run through ctest)";
  const std::string dir = testing_s3::MakeTempDir("train_s3");
  Runner runner(bin, dir);
  RegisterBuiltinObjectStores();

  testing_s3::FaultProxyOptions proxy_options;
  proxy_options.upstream_port = Server()->port();
  proxy_options.fault_rate = 0.2;
  proxy_options.seed = 11;
  proxy_options.faults = {testing_s3::Fault::kSlowDown, testing_s3::Fault::kReset};
  absl::StatusOr<std::unique_ptr<testing_s3::FaultProxy>> proxy =
      testing_s3::FaultProxy::Start(proxy_options);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const std::string faulty_uri = Server()->UriVia(
      (*proxy)->port(), "train", "max_attempts=12&retry_base_ms=5&retry_max_ms=100");
  absl::StatusOr<std::unique_ptr<ObjectStore>> direct = OpenObjectStore(Server()->Uri("train"));
  ASSERT_TRUE(direct.ok()) << direct.status();

  const std::string reference = dir + "/reference.safetensors";
  const std::string resumed = dir + "/resumed.safetensors";
  Output ref = runner.Run(
      runner.UnderRun(2, runner.Train({"--steps", "16", "--dump-weights", reference})));
  ASSERT_EQ(ref.exit.exit_code, 0) << ref.err;

  auto command = [&](int steps) {
    return runner.UnderRun(
        2, runner.Train({"--steps", std::to_string(steps), "--checkpoint-uri", faulty_uri,
                         "--job-id", kJob, "--checkpoint-every", "4", "--keep", "5",
                         "--dump-weights", resumed}));
  };
  Output first = runner.Run(command(12));
  ASSERT_EQ(first.exit.exit_code, 0) << first.err;
  EXPECT_EQ(Committed(direct->get()), (std::vector<int64_t>{4, 8, 12}));
  int64_t injected = 0;
  for (const auto& [fault, n] : (*proxy)->faults_injected()) injected += n;
  EXPECT_GT(injected, 0);
  std::cerr << (*proxy)->requests() << " requests through the proxy, " << injected
            << " faults injected\n";

  // Flip one byte in the middle of rank 1's shard of step 12 (same size).
  const std::string shard = ckpt_layout::ShardKey(kJob, 12, 1, 2);
  absl::StatusOr<std::string> bytes = (*direct)->Get(shard);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  (*bytes)[bytes->size() / 2] ^= 0x40;
  ASSERT_TRUE((*direct)->Put(shard, *bytes).ok());

  Output second = runner.Run(command(16));
  ASSERT_EQ(second.exit.exit_code, 0) << second.err;
  std::vector<nlohmann::json> resumes = JsonLines(second.out, "resume");
  ASSERT_EQ(resumes.size(), 1u) << second.out;
  EXPECT_EQ(resumes[0]["step"].get<int64_t>(), 8);
  EXPECT_TRUE(absl::StrContains(second.err, "skips step 12")) << second.err;
  EXPECT_TRUE(absl::StrContains(second.err, shard)) << second.err;
  EXPECT_EQ(Committed(direct->get()), (std::vector<int64_t>{4, 8, 12, 16}));
  const std::string want = ReadFile(reference);
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(want == ReadFile(resumed)) << "final weights differ from the uninterrupted run";
  (void)system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace athanor::train_test
