#include "testing/s3/s3_test_env.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace athanor::testing_s3 {
namespace {

S3rverProcess* g_server = nullptr;
std::string g_skip_reason;
volatile pid_t g_server_pgid = 0;

void OnWatchdog(int) {
  static const char kMsg[] = "s3 test watchdog fired: killing s3rver and exiting\n";
  (void)!write(2, kMsg, sizeof(kMsg) - 1);
  if (g_server_pgid > 0) kill(-g_server_pgid, SIGKILL);
  _exit(3);
}

class S3rverEnvironment : public testing::Environment {
 public:
  S3rverEnvironment(std::string bucket, int watchdog) : bucket_(std::move(bucket)), watchdog_(watchdog) {}
  void SetUp() override {
    signal(SIGALRM, OnWatchdog);
    alarm(static_cast<unsigned>(watchdog_));
    auto server = S3rverProcess::Start(bucket_);
    if (!server.ok()) {
      g_skip_reason = server.status().ToString();
      return;
    }
    g_server = server->release();
    g_server_pgid = g_server->pid();
  }
  void TearDown() override {
    delete g_server;
    g_server = nullptr;
    g_server_pgid = 0;
    alarm(0);
  }

 private:
  std::string bucket_;
  int watchdog_;
};

}  // namespace

S3rverProcess* Server() { return g_server; }
std::string SkipReason() { return g_skip_reason; }

void* RegisterS3rverEnvironment(const std::string& bucket, int watchdog_seconds) {
  return testing::AddGlobalTestEnvironment(new S3rverEnvironment(bucket, watchdog_seconds));
}

}  // namespace athanor::testing_s3
