// The node checkpoint service's stats file as the agent reads it, and the
// upload counters across service restarts.
#include "worker/agent/checkpoint_counters.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

class ServiceStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path().string() + "/ckpt_stats_test." +
            std::to_string(getpid()) + ".json";
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  std::string path_;
};

TEST_F(ServiceStatsTest, ReadsTheServiceTotals) {
  EXPECT_TRUE(absl::IsNotFound(ReadServiceStats(path_).status()));
  Write(R"({"uploaded":3,"failed":1,"bytes":3145728,"upload_seconds":1.5,"pid":4242})");
  absl::StatusOr<ServiceStats> s = ReadServiceStats(path_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->totals.uploads, 3u);
  EXPECT_EQ(s->totals.failures, 1u);
  EXPECT_EQ(s->totals.bytes, 3145728);
  EXPECT_EQ(s->totals.seconds, 1.5);
}

TEST_F(ServiceStatsTest, RefusesAMalformedFileNamingWhat) {
  Write("{not json");
  EXPECT_EQ(ReadServiceStats(path_).status().message(), path_ + ": not a JSON object");
  Write(R"({"uploaded":-3,"failed":0,"bytes":0,"upload_seconds":0,"pid":1})");
  EXPECT_EQ(ReadServiceStats(path_).status().message(),
            path_ + ": 'uploaded' is missing or not a non-negative number");
  Write(R"({"uploaded":1,"failed":0,"bytes":0,"pid":1})");
  EXPECT_EQ(ReadServiceStats(path_).status().message(),
            path_ + ": 'upload_seconds' is missing or not a non-negative number");
  Write(std::string(5000, ' '));
  EXPECT_EQ(ReadServiceStats(path_).status().message(), path_ + ": over 4096 bytes");
}

TEST(ServiceUploadCounterTest, CountsOnlyUpAcrossServiceRestarts) {
  ServiceUploadCounter c;
  c.Observe({10, {1, 0, 100, 0.5}});
  c.Observe({10, {3, 1, 300, 1.5}});
  c.Observe({10, {3, 1, 300, 1.5}});  // the same reading again
  EXPECT_EQ(c.total().uploads, 3u);
  // The service restarted (another pid): its totals start from zero again.
  c.Observe({11, {1, 0, 50, 0.25}});
  const UploadFigures t = c.total();
  EXPECT_EQ(t.uploads, 4u);
  EXPECT_EQ(t.failures, 1u);
  EXPECT_EQ(t.bytes, 350);
  EXPECT_EQ(t.seconds, 1.75);
}

}  // namespace
}  // namespace athanor::agent
