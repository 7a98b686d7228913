#include "collectives/progress_communicator.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "collectives/local_communicator.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

// A backend that completes every call inside its issue, as the ucx backend's
// two-rank exchange does under a blocking wrapper, and reads the page there.
class CompletesInIssue : public Communicator {
 public:
  explicit CompletesInIssue(std::string page) : page_(std::move(page)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "test"; }
  std::unique_ptr<Work> AllReduceAsync(const void*, void*, size_t, DataType, ReduceOp,
                                       const CollectiveOptions&) override {
    return Seen();
  }
  std::unique_ptr<Work> ReduceScatterAsync(const void*, void*, size_t, DataType, ReduceOp,
                                           const CollectiveOptions&) override {
    return Seen();
  }
  std::unique_ptr<Work> AllGatherAsync(const void*, void*, size_t, DataType,
                                       const CollectiveOptions&) override {
    return Seen();
  }
  std::unique_ptr<Work> BroadcastAsync(void*, size_t, DataType, int,
                                       const CollectiveOptions&) override {
    return Seen();
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions&) override { return Seen(); }
  void Abort() override {}

  std::optional<ProgressSnapshot> during_issue;

 private:
  std::unique_ptr<Work> Seen() {
    absl::StatusOr<ProgressSnapshot> s = ReadProgressPage(page_);
    if (s.ok()) during_issue = *s;
    return MakeDoneWork(absl::OkStatus());
  }
  const std::string page_;
};

class ProgressCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-progress-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    page_ = dir_ + "/page";
    absl::StatusOr<std::unique_ptr<ProgressWriter>> w = ProgressWriter::Open(page_);
    ASSERT_TRUE(w.ok()) << w.status();
    writer_ = std::move(*w);
  }
  void TearDown() override {
    writer_.reset();
    unlink(page_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, page_;
  std::unique_ptr<ProgressWriter> writer_;
};

TEST_F(ProgressCommunicatorTest, ABlockingCallThatFinishesInItsIssueShowsAsWaitingThere) {
  CompletesInIssue inner(page_);
  ProgressCommunicator comm(&inner, writer_.get());
  float x = 1;
  ASSERT_TRUE(comm.AllReduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, {}).ok());
  ASSERT_TRUE(inner.during_issue.has_value());
  EXPECT_EQ(inner.during_issue->collective_seq, 1u);
  EXPECT_TRUE(inner.during_issue->waiting);
  EXPECT_EQ(inner.during_issue->waiting_seq, 1u);
  EXPECT_EQ(inner.during_issue->op, ProgressOp::kAllReduce);

  ASSERT_TRUE(comm.Barrier({}).ok());
  EXPECT_EQ(inner.during_issue->collective_seq, 2u);
  EXPECT_EQ(inner.during_issue->waiting_seq, 2u);
  EXPECT_EQ(inner.during_issue->op, ProgressOp::kBarrier);

  absl::StatusOr<ProgressSnapshot> after = ReadProgressPage(page_);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->collective_seq, 2u);
  EXPECT_FALSE(after->waiting);
  EXPECT_EQ(after->waiting_seq, 0u);
  EXPECT_EQ(after->op, ProgressOp::kNone);
}

TEST_F(ProgressCommunicatorTest, AnAsyncIssueIsCountedButNotAWait) {
  CompletesInIssue inner(page_);
  ProgressCommunicator comm(&inner, writer_.get());
  float x = 1;
  std::unique_ptr<Work> w = comm.AllReduceAsync(&x, &x, 1, DataType::kF32, ReduceOp::kSum, {});
  ASSERT_TRUE(inner.during_issue.has_value());
  EXPECT_EQ(inner.during_issue->collective_seq, 1u);
  EXPECT_FALSE(inner.during_issue->waiting);
  EXPECT_EQ(inner.during_issue->waiting_seq, 0u);
  ASSERT_TRUE(w->Wait(std::chrono::seconds(1)).ok());
  absl::StatusOr<ProgressSnapshot> after = ReadProgressPage(page_);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->collective_seq, 1u);
  EXPECT_EQ(after->waiting_seq, 0u);
}

}  // namespace
}  // namespace athanor
