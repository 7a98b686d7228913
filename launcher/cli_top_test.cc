// One frame of `athanor top`: what it shows, and that it fits 80x24.
#include <gtest/gtest.h>

#include "launcher/cli_top.h"

namespace athanor::cli {
namespace {

TEST(TopRenderTest, ShowsGridJobsAndQueueWithinTheTerminal) {
  rpc::ClusterView view;
  view.set_queue_length(1);
  for (const char* name : {"node-a", "node-b"}) {
    rpc::NodeStatus* n = view.add_nodes();
    n->set_name(name);
    n->set_state("UP");
    for (int g = 0; g < 2; ++g) {
      rpc::GpuSlot* s = n->add_gpus();
      s->set_index(g);
      if (std::string(name) == "node-a") {
        s->set_job_id("7");
        s->set_tenant("alice");
        s->set_measured(g == 0);
        s->set_utilization(93);
      }
    }
  }
  rpc::JobStatus* run = view.add_jobs();
  run->set_id("7");
  run->set_tenant("alice");
  run->set_state("RUNNING");
  run->set_gpus(2);
  run->mutable_last()->set_step(500);
  run->mutable_last()->set_loss(1.25);
  run->mutable_last()->set_unix_ms(1);
  run->mutable_last()->set_total_steps(1100);
  run->set_steps_per_s(2);
  rpc::JobStatus* wait = view.add_jobs();
  wait->set_id("8");
  wait->set_tenant("bob");
  wait->set_state("PENDING");
  wait->set_gpus(4);
  wait->add_why("no node fits: needs 1 node with 4 free GPUs; 0 nodes have them free");
  for (int width : {80, 40}) {
    std::vector<std::string> lines = RenderTop(view, "127.0.0.1:7700", width, 24);
    ASSERT_EQ(lines.size(), 24u);
    for (const std::string& l : lines) EXPECT_LE(static_cast<int>(l.size()), width) << l;
  }
  std::vector<std::string> lines = RenderTop(view, "127.0.0.1:7700", 80, 24);
  auto has = [&](const std::string& text) {
    for (const std::string& l : lines) {
      if (l == text) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("node-a       UP        7:93     7:-")) << lines[3];
  EXPECT_TRUE(has("node-b       UP        .:-      .:-")) << lines[4];
  // 600 steps to go at 2/s: 5 minutes.
  EXPECT_TRUE(has("7      alice      RUNNING       2    500    1.2500    2.00    5m00s")) << lines[7];
  EXPECT_TRUE(has("8      bob           4  no node fits: needs 1 node with 4 free GPUs; 0 nodes\xE2\x80\xA6"))
      << lines[9];
  std::vector<std::string> narrow = RenderTop(view, "127.0.0.1:7700", 40, 24);
  EXPECT_EQ(narrow[9], "8      bob           4  no node fits:\xE2\x80\xA6");
  EXPECT_EQ(lines.back(), "q quits");
}

}  // namespace
}  // namespace athanor::cli
