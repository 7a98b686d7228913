#include "worker/agent/rank_supervisor.h"
#include "worker/agent/inventory.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace athanor::agent {
namespace {

// Watchdog: a hang fails the binary instead of stalling CI.
const int kWatchdog = (alarm(50), 0);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RankSupervisorTest : public ::testing::Test {
 protected:
  RankSupervisorTest() {
    char dir[] = "/tmp/rank_supervisor_test.XXXXXX";
    work_dir_ = mkdtemp(dir);
    supervisor_ = std::make_unique<RankSupervisor>(work_dir_, &clock_);
  }
  RankTarget Target(int rank, const std::string& script) {
    RankTarget t;
    t.key = {"5", 2, rank};
    t.command = {"sh", "-c", script};
    t.env = {{"RANK", std::to_string(rank)}};
    t.gpu_ids = {rank, rank + 4};
    t.kill_after_ms = 1000;
    return t;
  }
  // Waits (blocking on the child, no sleeps) until `rank` has exited.
  RankStatusReport WaitExit(int rank) {
    for (;;) {
      supervisor_->Reap();
      for (const RankStatusReport& r : supervisor_->Reports()) {
        if (r.key.rank == rank && r.phase != RankPhase::kRunning) return r;
      }
      supervisor_->WaitForChildExit();
    }
  }
  void WaitForLog(int rank, const std::string& text) {
    std::string path = *RankSupervisor::LogPath(work_dir_, {"5", 2, rank});
    // The child writes the log asynchronously; poll the file, bounded (10 s).
    for (int i = 0; i < 2000 && ReadFile(path).find(text) == std::string::npos; ++i) {
      usleep(5000); /* sleep override */
    }
    ASSERT_NE(ReadFile(path).find(text), std::string::npos);
  }

  FakeClock clock_;
  std::string work_dir_;
  std::unique_ptr<RankSupervisor> supervisor_;
};

TEST_F(RankSupervisorTest, RunsRankWithEnvAndLogsOutput) {
  supervisor_->Converge({Target(1, "echo rank=$RANK cvd=$CUDA_VISIBLE_DEVICES; echo err >&2; exit 4")});
  RankStatusReport r = WaitExit(1);
  EXPECT_EQ(r.phase, RankPhase::kExited);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(ReadFile(work_dir_ + "/jobs/5/attempt-2/rank-1.log"), "rank=1 cvd=1,5\nerr\n");
  // Still desired: the exit keeps being reported, and it is not restarted.
  supervisor_->Converge({Target(1, "exit 0")});
  ASSERT_EQ(supervisor_->Reports().size(), 1u);
  EXPECT_EQ(supervisor_->Reports()[0].exit_code, 4);
  // Once it leaves the desired set it is forgotten.
  supervisor_->Converge({});
  EXPECT_TRUE(supervisor_->Reports().empty());
}

TEST_F(RankSupervisorTest, TerminateSendsSigterm) {
  supervisor_->Converge({Target(0, "echo up; exec sleep 100")});
  WaitForLog(0, "up");
  RankTarget stop = Target(0, "");
  stop.terminate = true;
  supervisor_->Converge({stop});
  RankStatusReport r = WaitExit(0);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_TRUE(r.signal_from_agent);
}

TEST_F(RankSupervisorTest, SigkillAfterDeadlineWhenTermIsIgnored) {
  supervisor_->Converge({Target(0, "trap '' TERM; echo ready; sleep 100")});
  WaitForLog(0, "ready");
  RankTarget stop = Target(0, "");
  stop.terminate = true;
  supervisor_->Converge({stop});
  clock_.Advance(Millis(999));
  supervisor_->EnforceDeadlines();
  EXPECT_EQ(supervisor_->running_count(), 1);
  clock_.Advance(Millis(1));
  supervisor_->EnforceDeadlines();
  RankStatusReport r = WaitExit(0);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_TRUE(r.signal_from_agent);
}

// A SIGKILL from elsewhere (an operator, the OOM killer) is not the agent's,
// even while the agent is stopping the rank with SIGTERM.
TEST_F(RankSupervisorTest, SignalFromElsewhereIsReportedAsSuch) {
  for (bool stopping : {false, true}) {
    SCOPED_TRACE(stopping);
    supervisor_->Converge({Target(0, "trap '' TERM; echo ready; sleep 100")});
    WaitForLog(0, "ready");
    if (stopping) {
      RankTarget stop = Target(0, "");
      stop.terminate = true;
      supervisor_->Converge({stop});
    }
    ASSERT_EQ(supervisor_->Reports().size(), 1u);
    ASSERT_EQ(kill(supervisor_->Reports()[0].pid, SIGKILL), 0);
    RankStatusReport r = WaitExit(0);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_FALSE(r.signal_from_agent);
    supervisor_->Converge({});
    ASSERT_TRUE(supervisor_->Reports().empty());
    std::filesystem::remove_all(work_dir_ + "/jobs");  // the next round logs afresh
  }
}

TEST_F(RankSupervisorTest, UndesiredRankIsKilled) {
  supervisor_->Converge({Target(0, "exec sleep 100")});
  supervisor_->Converge({});
  RankStatusReport r = WaitExit(0);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_TRUE(r.signal_from_agent);
  supervisor_->Converge({});
  EXPECT_TRUE(supervisor_->Reports().empty());
}

TEST_F(RankSupervisorTest, TerminatedRankThatNeverStartedIsNotStarted) {
  RankTarget t = Target(0, "exit 0");
  t.terminate = true;
  supervisor_->Converge({t});
  EXPECT_TRUE(supervisor_->Reports().empty());
}

TEST_F(RankSupervisorTest, FailedToStartIsReported) {
  RankTarget t = Target(0, "");
  t.command = {"/nonexistent/binary"};
  supervisor_->Converge({t});
  std::vector<RankStatusReport> reports = supervisor_->Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].phase, RankPhase::kFailedToStart);
  EXPECT_EQ(reports[0].exit_code, 127);
  EXPECT_EQ(reports[0].message, "cannot execute '/nonexistent/binary': No such file or directory");
}

TEST(InventoryTest, DeclaredSlotsAndOsFigures) {
  Inventory inv = DetectInventory(3);
  EXPECT_EQ(inv.gpus, 3);
  EXPECT_EQ(inv.gpu_model, "none");
  EXPECT_EQ(inv.cpus, static_cast<int32_t>(std::thread::hardware_concurrency()));
  EXPECT_GT(inv.memory_mb, 0);
  EXPECT_GE(DetectInventory(-1).gpus, 0);  // auto: real devices, or 0 without any
}

TEST(LogPathTest, RefusesUnsafeJobIds) {
  EXPECT_EQ(RankSupervisor::LogPath("/w", {"..", 1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RankSupervisor::LogPath("/w", {"a/b", 1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*RankSupervisor::LogPath("/w", {"12", 3, 4}), "/w/jobs/12/attempt-3/rank-4.log");
}

}  // namespace
}  // namespace athanor::agent
