// The telemetry side channel: message parsing (and refusal of bad ones), and
// datagrams on an attempt's socket arriving as rank 0's samples.
#include "worker/agent/telemetry_hub.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

bool Parse(const std::string& msg, int32_t* rank, StepSample* s, bool* skipped, std::string* why) {
  return TelemetryHub::Parse(msg.data(), msg.size(), rank, s, skipped, why);
}

TEST(TelemetryHubTest, ParsesTheStepLine) {
  int32_t rank = -1;
  StepSample s;
  bool skipped = false;
  std::string why;
  ASSERT_TRUE(Parse(R"({"rank":1,"step":12,"loss":3.5,"tokens_per_s":5120,"loss_scale":65536,)"
                    R"("comm_wait_ms":20,"step_ms":80,"skipped":true,"grad_bytes":4,"ckpt_stall_ms":1.5,"total_steps":100})",
                    &rank, &s, &skipped, &why))
      << why;
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(s.step, 12);
  EXPECT_EQ(s.loss, 3.5);
  EXPECT_EQ(s.tokens_per_s, 5120);
  EXPECT_EQ(s.loss_scale, 65536);
  EXPECT_EQ(s.comm_wait_share, 0.25);
  EXPECT_EQ(s.step_ms, 80);
  EXPECT_EQ(s.ckpt_stall_ms, 1.5);
  EXPECT_EQ(s.total_steps, 100);
  EXPECT_TRUE(skipped);
  EXPECT_EQ(s.ckpt_step, -1);  // no checkpoint told
  ASSERT_TRUE(Parse(R"({"step":20,"loss":1,"ckpt_step":20,"ckpt_bytes":4096,"ckpt_upload_ms":12.5})",
                    &rank, &s, &skipped, &why))
      << why;
  EXPECT_EQ(s.ckpt_step, 20);
  EXPECT_EQ(s.ckpt_bytes, 4096);
  EXPECT_EQ(s.ckpt_upload_ms, 12.5);
  EXPECT_FALSE(Parse(R"({"step":20,"loss":1,"ckpt_bytes":1e30})", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "a checkpoint figure is out of range");
  // Found by fuzz_telemetry: a count past int64 was cast regardless.
  EXPECT_FALSE(Parse(R"({"step":1,"loss":1,"comm_wait_share":0.5,"skipped_steps":31e40})", &rank, &s, &skipped,
                     &why));
  EXPECT_EQ(why, "skipped_steps: out of range");
  // The minimum a script sends: step and loss; rank 0 by default.
  ASSERT_TRUE(Parse(R"({"step":0,"loss":1})", &rank, &s, &skipped, &why));
  EXPECT_EQ(rank, 0);
}

TEST(TelemetryHubTest, RefusesBadMessagesSayingWhy) {
  int32_t rank;
  StepSample s;
  bool skipped;
  std::string why;
  EXPECT_FALSE(Parse("not json", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "not a JSON object");
  EXPECT_FALSE(Parse(R"({"loss":1})", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "step: a non-negative integer is required");
  EXPECT_FALSE(Parse(R"({"step":-1,"loss":1})", &rank, &s, &skipped, &why));
  EXPECT_FALSE(Parse(R"({"step":1})", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "loss: required");
  EXPECT_FALSE(Parse(R"({"step":1,"loss":"low"})", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "a figure is not a finite number");
  EXPECT_FALSE(Parse(R"({"step":1,"loss":1,"rank":"zero"})", &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "rank: not a rank number");
  std::string big = R"({"step":1,"loss":1,"pad":")" + std::string(5000, 'x') + "\"}";
  EXPECT_FALSE(Parse(big, &rank, &s, &skipped, &why));
  EXPECT_EQ(why, "message over 4 KiB");
}

TEST(TelemetryHubTest, RankZeroSamplesArriveThroughTheSocket) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/telemetry_hub_test." +
                          std::to_string(getpid());
  {
    TelemetryHub hub(dir);
    EXPECT_FALSE(hub.SocketFor("../evil", 1).ok());
    absl::StatusOr<std::string> path = hub.SocketFor("42", 3);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, dir + "/jobs/42/telemetry/attempt-3.sock");
    EXPECT_EQ(*hub.SocketFor("42", 3), *path);  // one socket per attempt
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path->c_str());
    auto send = [&](const std::string& m) {
      ASSERT_EQ(sendto(fd, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
                static_cast<ssize_t>(m.size()));
    };
    send(R"({"rank":1,"step":0,"loss":9})");
    send("garbage");
    // Rank 1 tells two checkpoints it uploaded (the first twice: counted once)
    // and one it handed to the node's service (no upload time: not its own).
    const std::string told5 = R"({"rank":1,"step":5,"loss":9,"ckpt_step":5,"ckpt_bytes":1000,"ckpt_upload_ms":250})";
    send(told5);
    send(told5);
    send(R"({"rank":1,"step":10,"loss":9,"ckpt_step":10,"ckpt_bytes":3000,"ckpt_upload_ms":750})");
    send(R"({"rank":1,"step":11,"loss":9,"ckpt_step":11,"ckpt_bytes":3000})");
    for (int step = 0; step < 3; ++step) send(R"({"rank":0,"step":)" + std::to_string(step) + R"(,"loss":2.5,"skipped":true})");
    std::vector<JobSamples> got;
    size_t samples = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (samples < 3 && std::chrono::steady_clock::now() < deadline) {
      for (JobSamples& j : hub.Take()) {
        samples += j.samples.size();
        got.push_back(std::move(j));
      }
    }
    close(fd);
    ASSERT_EQ(samples, 3u);
    EXPECT_EQ(got[0].job_id, "42");
    EXPECT_EQ(got[0].attempt, 3);
    std::vector<StepSample> all;
    for (const JobSamples& j : got) all.insert(all.end(), j.samples.begin(), j.samples.end());
    for (int step = 0; step < 3; ++step) {
      EXPECT_EQ(all[step].step, step);
      EXPECT_EQ(all[step].loss, 2.5);
      EXPECT_EQ(all[step].skipped_steps, step + 1);  // counted by the hub
    }
    EXPECT_EQ(hub.dropped(), 1u);
    // Sent before rank 0's samples on the same socket, so already counted.
    const UploadFigures uploads = hub.rank_uploads();
    EXPECT_EQ(uploads.uploads, 2u);
    EXPECT_EQ(uploads.bytes, 4000);
    EXPECT_EQ(uploads.seconds, 1.0);
    hub.Retain({});
    EXPECT_FALSE(std::filesystem::exists(*path));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace athanor::agent
