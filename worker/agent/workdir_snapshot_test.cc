// WorkdirSnapshots over a fake transport: a stored work dir arrives packed
// with its size and sha256; a restoring rank waits (kPending) until its tar
// is fetched and unpacked into its rank dir, then finds the files exactly; a
// failed fetch fails the rank's start naming the key.
#include "worker/agent/workdir_snapshot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/synchronization/notification.h"
#include "storage/archive.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Keeps what Store was handed; Fetch copies `tar` (or fails when empty).
class FakeTransport : public WorkdirTransport {
 public:
  absl::Status Store(const RankKey&, const std::string& key, const std::string& tar_path, const std::string& digest,
                     int64_t size_bytes) override {
    stored_key = key;
    stored_digest = digest;
    stored_size = size_bytes;
    absl::StatusOr<std::string> d = storage::Sha256File(tar_path);
    actual_digest = d.ok() ? *d : "";
    fs::copy_file(tar_path, kept, fs::copy_options::overwrite_existing);
    return absl::OkStatus();
  }
  absl::Status Fetch(const RankKey&, const std::string&, const std::string& tar_path, int64_t) override {
    if (tar.empty()) return absl::PermissionDeniedError("not yours");
    fs::copy_file(tar, tar_path);
    return absl::OkStatus();
  }
  std::string kept, tar, stored_key, stored_digest, actual_digest;
  int64_t stored_size = 0;
};

class WorkdirSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/workdir-snapshot-" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/agent");
    auto t = std::make_unique<FakeTransport>();
    t->kept = dir_ + "/kept.tar";
    transport_ = t.get();
    snapshots_ = std::make_unique<WorkdirSnapshots>(dir_ + "/agent", std::move(t),
                                                    [](const std::string&) { return geteuid(); });
  }
  void TearDown() override {
    snapshots_.reset();
    fs::remove_all(dir_);
  }
  std::string dir_;
  FakeTransport* transport_ = nullptr;
  std::unique_ptr<WorkdirSnapshots> snapshots_;
};

TEST_F(WorkdirSnapshotTest, StoredThenRestoredExactly) {
  const std::string work = dir_ + "/old-rank";
  fs::create_directories(work + "/sub");
  std::ofstream(work + "/notes.txt") << "in the work dir\n";
  std::ofstream(work + "/sub/more.txt") << "deeper\n";
  ASSERT_TRUE(snapshots_->Store({"7", 1, 0}, work, "snapshots/a/snap-7-1/rank-0.tar").ok());
  EXPECT_EQ(transport_->stored_key, "snapshots/a/snap-7-1/rank-0.tar");
  EXPECT_EQ(transport_->stored_digest, transport_->actual_digest);
  EXPECT_EQ(transport_->stored_size, static_cast<int64_t>(fs::file_size(transport_->kept)));
  EXPECT_FALSE(fs::exists(work + ".snapshot.tar"));  // the packed copy is gone

  transport_->tar = transport_->kept;
  absl::Notification ready;
  snapshots_->SetOnReady([&] {
    if (!ready.HasBeenNotified()) ready.Notify();
  });
  RankTarget t;
  t.key = {"9", 1, 0};
  t.tenant = "a";
  t.restore_key = "snapshots/a/snap-7-1/rank-0.tar";
  EXPECT_EQ(snapshots_->AcquireRestore(t).state, WorkdirSnapshots::Lookup::kPending);
  ASSERT_TRUE(ready.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(snapshots_->AcquireRestore(t).state, WorkdirSnapshots::Lookup::kReady);
  const std::string rank_dir = dir_ + "/agent/jobs/9/attempt-1/rank-0";
  EXPECT_EQ(Read(rank_dir + "/notes.txt"), "in the work dir\n");
  EXPECT_EQ(Read(rank_dir + "/sub/more.txt"), "deeper\n");
  EXPECT_FALSE(fs::exists(rank_dir + ".restore.tar"));
  RankTarget none;
  none.key = {"10", 1, 0};
  EXPECT_EQ(snapshots_->AcquireRestore(none).state, WorkdirSnapshots::Lookup::kReady);  // nothing to restore
}

TEST_F(WorkdirSnapshotTest, AFailedFetchFailsTheStartNamingTheKey) {
  absl::Notification ready;
  snapshots_->SetOnReady([&] {
    if (!ready.HasBeenNotified()) ready.Notify();
  });
  RankTarget t;
  t.key = {"9", 1, 0};
  t.restore_key = "snapshots/a/snap-7-1/rank-0.tar";
  EXPECT_EQ(snapshots_->AcquireRestore(t).state, WorkdirSnapshots::Lookup::kPending);
  ASSERT_TRUE(ready.WaitForNotificationWithTimeout(absl::Seconds(20)));
  WorkdirSnapshots::Lookup l = snapshots_->AcquireRestore(t);
  EXPECT_EQ(l.state, WorkdirSnapshots::Lookup::kFailed);
  EXPECT_EQ(l.error,
            "cannot restore the work folder from snapshot key snapshots/a/snap-7-1/rank-0.tar: not yours");
  EXPECT_FALSE(fs::exists(dir_ + "/agent/jobs/9/attempt-1/rank-0"));
}

}  // namespace
}  // namespace athanor::agent
