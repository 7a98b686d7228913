// The ObjectStore conformance suite against a real S3 server (s3rver), both
// directly and through the fault-injecting proxy, plus S3-specific checks.
#include <atomic>
#include <cstdlib>

#include <gtest/gtest.h>

#include "checkpoint/object_store_conformance.h"
#include "checkpoint/s3/s3_object_store.h"
#include "testing/s3/fault_proxy.h"
#include "testing/s3/s3_test_env.h"

namespace athanor {
namespace {

using testing_s3::FaultProxy;
using testing_s3::Server;

[[maybe_unused]] void* const kEnv = testing_s3::RegisterS3rverEnvironment("conformance", 150);

std::atomic<int> next_prefix{0};

// Null only when s3rver is missing and ATHANOR_REQUIRE_S3RVER is unset (the
// suite then skips); options that fail to parse are this test's bug and fail.
std::unique_ptr<ObjectStore> MakeStore(int port, const std::string& extra) {
  if (Server() == nullptr) {
    if (std::getenv("ATHANOR_REQUIRE_S3RVER") != nullptr) {
      ADD_FAILURE() << "ATHANOR_REQUIRE_S3RVER is set but s3rver is unavailable: "
                    << testing_s3::SkipReason();
    }
    return nullptr;
  }
  std::string prefix = "t" + std::to_string(next_prefix++);
  auto options = ParseS3Options(Server()->UriVia(port, prefix, extra), {});
  if (!options.ok()) {
    ADD_FAILURE() << "S3 options for the conformance suite do not parse: " << options.status();
    return nullptr;
  }
  return std::make_unique<S3ObjectStore>(*options);
}

FaultProxy* Proxy() {
  static FaultProxy* proxy = [] {
    testing_s3::FaultProxyOptions options;
    options.upstream_port = Server()->port();
    options.fault_rate = 0.2;
    options.seed = 42;
    auto p = FaultProxy::Start(options);
    if (!p.ok()) ADD_FAILURE() << "the fault proxy did not start: " << p.status();
    return p.ok() ? p->release() : nullptr;
  }();
  return proxy;
}

// Stores get 1 MiB parts, so the 3 MiB streaming test is a 4-part upload.
INSTANTIATE_TEST_SUITE_P(
    S3, ObjectStoreConformance,
    testing::Values(
        StoreFactory{"s3rver",
                     [] {
                       return Server() ? MakeStore(Server()->port(), "part_size=1048576&upload_threads=3")
                                       : nullptr;
                     }},
        StoreFactory{"s3rver_via_fault_proxy", [] {
                       if (Server() == nullptr || Proxy() == nullptr) return std::unique_ptr<ObjectStore>();
                       return MakeStore(Proxy()->port(),
                                        "part_size=1048576&upload_threads=3&max_attempts=12"
                                        "&retry_base_ms=5&retry_max_ms=100&low_speed_seconds=1");
                     }}),
    StoreFactoryName);

TEST(S3ObjectStore, ListFollowsContinuationTokens) {
  ATHANOR_REQUIRE_S3RVER();
  auto store = MakeStore(Server()->port(), "list_page_size=7");
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store->Put("p/" + std::to_string(100 + i), "x").ok());
  }
  auto listed = store->List("p/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 20u);
  EXPECT_EQ(listed->front().key, "p/100");
  EXPECT_EQ(listed->back().key, "p/119");
}

// s3rver does not verify SigV4 signatures (sigv4_test checks ours against the
// AWS example); it does reject unknown access keys.
TEST(S3ObjectStore, UnknownAccessKeyIsPermissionDenied) {
  ATHANOR_REQUIRE_S3RVER();
  auto options = ParseS3Options(Server()->Uri("x", ""), {});
  ASSERT_TRUE(options.ok());
  options->access_key = "NOBODY";
  S3ObjectStore store(*options);
  absl::Status status = store.Put("k", "v");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_NE(status.message().find("InvalidAccessKeyId"), absl::string_view::npos) << status;
}

TEST(S3ObjectStore, ServersWithoutListMultipartUploadsSayUnimplemented) {
  ATHANOR_REQUIRE_S3RVER();
  auto store = MakeStore(Server()->port(), "");
  auto uploads = store->ListPendingUploads("");
  // s3rver answers NotImplemented; AWS and MinIO list them.
  if (uploads.ok()) {
    EXPECT_EQ(uploads->size(), 0u);
  } else {
    EXPECT_EQ(uploads.status().code(), absl::StatusCode::kUnimplemented) << uploads.status();
  }
}

TEST(S3ObjectStore, TheFaultProxyReallyInjectedFaults) {
  ATHANOR_REQUIRE_S3RVER();
  // Runs after the conformance suite in this binary's default order.
  auto store = MakeStore(Proxy()->port(), "max_attempts=12&retry_base_ms=5&retry_max_ms=100&low_speed_seconds=1");
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(store->Put("f/" + std::to_string(i), std::string(100, 'a' + i % 26)).ok());
  for (int i = 0; i < 30; ++i) EXPECT_EQ(*store->Get("f/" + std::to_string(i), 0, -1), std::string(100, 'a' + i % 26));
  int64_t total = 0;
  for (const auto& [fault, n] : Proxy()->faults_injected()) total += n;
  EXPECT_GT(Proxy()->requests(), 60);
  EXPECT_GT(total, 0);
  EXPECT_GT(static_cast<S3ObjectStore*>(store.get())->client()->retries(), 0);
}

}  // namespace
}  // namespace athanor
