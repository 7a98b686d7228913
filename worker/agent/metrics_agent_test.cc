// The agent's exposition of checkpoint uploads: the ranks' own and the node
// service's, exact lines; no service series where no service runs.
#include "worker/agent/metrics_agent.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace athanor::agent {
namespace {

TEST(AgentMetricsTest, ExportsCheckpointUploadsByUploader) {
  AgentMetrics metrics("node-a");
  metrics.SetCheckpointUploads({2, 0, 4000, 1.0}, UploadFigures{3, 1, 3145728, 1.5});
  metrics.Update({}, nullptr, {}, 0);
  const std::string text = metrics.Scrape();
  for (const char* line : {
           R"(athanor_agent_checkpoint_uploads_total{uploader="rank",result="ok",node="node-a"} 2)",
           R"(athanor_agent_checkpoint_uploads_total{uploader="service",result="ok",node="node-a"} 3)",
           R"(athanor_agent_checkpoint_uploads_total{uploader="service",result="failed",node="node-a"} 1)",
           R"(athanor_agent_checkpoint_upload_bytes_total{uploader="rank",node="node-a"} 4000)",
           R"(athanor_agent_checkpoint_upload_bytes_total{uploader="service",node="node-a"} 3145728)",
           R"(athanor_agent_checkpoint_upload_seconds_total{uploader="rank",node="node-a"} 1)",
           R"(athanor_agent_checkpoint_upload_seconds_total{uploader="service",node="node-a"} 1.5)",
       }) {
    EXPECT_TRUE(absl::StrContains(text, std::string(line) + "\n")) << line << "\nin:\n" << text;
  }
  // Without a service on the node, only the ranks' series.
  metrics.SetCheckpointUploads({}, std::nullopt);
  metrics.Update({}, nullptr, {}, 0);
  const std::string plain = metrics.Scrape();
  EXPECT_TRUE(absl::StrContains(
      plain, "athanor_agent_checkpoint_uploads_total{uploader=\"rank\",result=\"ok\",node=\"node-a\"} 0\n"))
      << plain;
  EXPECT_FALSE(absl::StrContains(plain, "uploader=\"service\"")) << plain;
}

TEST(AgentMetricsTest, ExportsTheImageCacheOnlyWhereThereIsOne) {
  AgentMetrics metrics("node-a");
  metrics.Update({}, nullptr, {}, 0);
  EXPECT_FALSE(absl::StrContains(metrics.Scrape(), "image_cache"));
  metrics.SetImageCache({.hits = 7, .misses = 2, .bytes_fetched = 4096000, .bytes_cached = 3000000, .images = 2});
  metrics.Update({}, nullptr, {}, 0);
  const std::string text = metrics.Scrape();
  for (const char* line : {
           R"(athanor_agent_image_cache_hits_total{node="node-a"} 7)",
           R"(athanor_agent_image_cache_misses_total{node="node-a"} 2)",
           R"(athanor_agent_image_cache_fetched_bytes_total{node="node-a"} 4096000)",
           R"(athanor_agent_image_cache_bytes{node="node-a"} 3000000)",
           R"(athanor_agent_image_cache_images{node="node-a"} 2)",
       }) {
    EXPECT_TRUE(absl::StrContains(text, std::string(line) + "\n")) << line << "\nin:\n" << text;
  }
}

}  // namespace
}  // namespace athanor::agent
