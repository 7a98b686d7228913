#include "common/progress_page.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace athanor {
namespace {

class ProgressPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/progress-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(ProgressPageTest, ReaderSeesWhatTheWriterStored) {
  const std::string path = dir_ + "/page";
  absl::StatusOr<std::unique_ptr<ProgressWriter>> w = ProgressWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<ProgressSnapshot> s = ReadProgressPage(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, -1);
  EXPECT_EQ(s->collective_seq, 0u);
  EXPECT_FALSE(s->waiting);

  (*w)->StepDone(7, 12.5, 20.25);
  EXPECT_EQ((*w)->CollectiveIssued(), 1u);
  EXPECT_EQ((*w)->CollectiveIssued(), 2u);
  (*w)->WaitBegin(2, ProgressOp::kAllReduce);
  s = ReadProgressPage(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, 7);
  EXPECT_DOUBLE_EQ(s->step_compute_ms, 12.5);
  EXPECT_DOUBLE_EQ(s->step_ms, 20.25);
  EXPECT_EQ(s->collective_seq, 2u);
  EXPECT_TRUE(s->waiting);
  EXPECT_EQ(s->waiting_seq, 2u);
  EXPECT_EQ(s->op, ProgressOp::kAllReduce);
  EXPECT_STREQ(ProgressOpName(s->op), "all-reduce");
  EXPECT_GT(s->update_unix_ms, 1'600'000'000'000);

  /* sleep override */ usleep(20000);  // the duration under test: time blocked in the collective,
                                       // as the writer measures it with its own clock
  (*w)->WaitEnd();
  const double waited = (*w)->TakeWaitMs();
  EXPECT_GE(waited, 20.0);
  EXPECT_LT(waited, 5000.0);
  EXPECT_EQ((*w)->TakeWaitMs(), 0.0);  // taken
  s = ReadProgressPage(path);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->waiting);
  EXPECT_EQ(s->op, ProgressOp::kNone);

  {
    ProgressBlockedScope saving(w->get(), ProgressOp::kCheckpointSave);
    s = ReadProgressPage(path);
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE(s->waiting);  // not a collective
    EXPECT_EQ(s->waiting_seq, 0u);
    EXPECT_EQ(s->op, ProgressOp::kCheckpointSave);
    EXPECT_STREQ(ProgressOpName(s->op), "checkpoint save");
  }
  EXPECT_EQ((*w)->TakeWaitMs(), 0.0);  // nor counted as collective wait
  s = ReadProgressPage(path);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->op, ProgressOp::kNone);
  ProgressBlockedScope no_page(nullptr, ProgressOp::kCheckpointSave);  // allowed, does nothing
}

TEST_F(ProgressPageTest, BadPagesAreRefusedNamingWhy) {
  EXPECT_EQ(ReadProgressPage(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir_ + "/short") << "abc";
  EXPECT_EQ(ReadProgressPage(dir_ + "/short").status().code(), absl::StatusCode::kDataLoss);
  std::ofstream(dir_ + "/garbage") << std::string(sizeof(ProgressPageLayout), 'x');
  absl::Status g = ReadProgressPage(dir_ + "/garbage").status();
  EXPECT_EQ(g.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(g.message().find("bad magic"), std::string::npos) << g;
  // A FIFO must not block the reader.
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadProgressPage(dir_ + "/fifo").status().code(), absl::StatusCode::kDataLoss);
  ASSERT_EQ(symlink((dir_ + "/garbage").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_EQ(ReadProgressPage(dir_ + "/link").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ProgressWriter::Open("relative").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ProgressPageTest, OpenIfNamedOpensOnlyANamedPage) {
  absl::StatusOr<std::unique_ptr<ProgressWriter>> none = ProgressWriter::OpenIfNamed("");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(ProgressWriter::OpenIfNamed("relative/page").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A page that cannot be created is no page, not an error.
  absl::StatusOr<std::unique_ptr<ProgressWriter>> missing_dir =
      ProgressWriter::OpenIfNamed(dir_ + "/no-such-dir/page");
  ASSERT_TRUE(missing_dir.ok()) << missing_dir.status();
  EXPECT_EQ(*missing_dir, nullptr);
  absl::StatusOr<std::unique_ptr<ProgressWriter>> w =
      ProgressWriter::OpenIfNamed(dir_ + "/named-page");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_NE(*w, nullptr);
  (*w)->StepDone(3, 1, 2);
  absl::StatusOr<ProgressSnapshot> s = ReadProgressPage(dir_ + "/named-page");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step, 3);
}

// A page left mid-write (a writer stopped between its stores) is reported,
// never read torn.
TEST(ProgressLayout, OddVersionIsUnavailable) {
  ProgressPageLayout page{};
  page.magic.store(kProgressMagic);
  page.layout_version.store(1);
  page.version.store(3);
  EXPECT_EQ(ReadProgressLayout(page).status().code(), absl::StatusCode::kUnavailable);
  page.version.store(4);
  page.step.store(9);
  absl::StatusOr<ProgressSnapshot> s = ReadProgressLayout(page);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->step, 9);
}

}  // namespace
}  // namespace athanor
