// VolumeSync over a fake transport: an attempt's volumes are fetched and
// unpacked before its ranks start, a read-write volume is stored back after
// the attempt's last rank here ended (and only when changed; unchanged or
// failed, it is reported), a failed fetch names the volume, and a failed
// store is told in the rank logs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "storage/archive.h"
#include "worker/agent/volume_sync.h"

namespace athanor::agent {
namespace {
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Volumes as tars in a folder of the test's; stores recorded.
class FakeTransport : public VolumeTransport {
 public:
  explicit FakeTransport(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<VolumeContent> Fetch(const std::string&, int32_t, const std::string& volume,
                                      const std::string& tar_path) override {
    absl::MutexLock lock(&mu_);
    if (volume == "broken") return absl::UnavailableError("no route");
    auto it = content_.find(volume);
    if (it == content_.end()) return VolumeContent{};
    fs::copy_file(dir_ + "/" + volume + ".tar", tar_path);
    return it->second;
  }
  absl::Status Store(const std::string&, int32_t, const std::string& volume, int64_t base,
                     const std::string& tar_path, const VolumeContent& content) override {
    absl::MutexLock lock(&mu_);
    if (refuse_) return absl::AbortedError("volume is at generation 9");
    const int64_t current = content_.count(volume) ? content_[volume].generation : 0;
    if (base != current) return absl::AbortedError("stale");
    fs::copy_file(tar_path, dir_ + "/" + volume + ".tar", fs::copy_options::overwrite_existing);
    content_[volume] = {current + 1, content.digest, content.size_bytes};
    ++stores_;
    return absl::OkStatus();
  }
  absl::Status Report(const std::string& job, int32_t attempt, const std::string& volume, int64_t base) override {
    absl::MutexLock lock(&mu_);
    reports_.push_back(absl::StrCat(job, "/", attempt, "/", volume, "@", base));
    return absl::OkStatus();
  }
  absl::Mutex mu_;
  std::vector<std::string> reports_;  // job/attempt/volume@base_generation
  std::string dir_;
  std::map<std::string, VolumeContent> content_;
  int stores_ = 0;
  bool refuse_ = false;
};

class VolumeSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / ("volume-sync-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "store");
    fs::create_directories(root_ / "work");
    auto t = std::make_unique<FakeTransport>((root_ / "store").string());
    transport_ = t.get();
    sync_ = std::make_unique<VolumeSync>((root_ / "work").string(), std::move(t),
                                         [](const std::string&) { return geteuid(); });
  }
  void TearDown() override {
    sync_.reset();
    fs::remove_all(root_);
  }
  RankTarget Target(const std::string& job, int32_t rank, std::vector<VolumeMountTarget> volumes) {
    RankTarget t;
    t.key.job_id = job;
    t.key.attempt = 1;
    t.key.rank = rank;
    t.tenant = "a";
    t.volumes = std::move(volumes);
    return t;
  }
  std::string Dir(const std::string& job, const std::string& name) {
    return VolumeDir((root_ / "work").string(), job, 1, name);
  }

  fs::path root_;
  FakeTransport* transport_ = nullptr;
  std::unique_ptr<VolumeSync> sync_;
};

TEST_F(VolumeSyncTest, FetchesBeforeTheRanksAndStoresAfterTheLast) {
  RankTarget r0 = Target("7", 0, {{"data", "/mnt", false}, {"in", "/srv", true}});
  RankTarget r1 = Target("7", 1, r0.volumes);
  EXPECT_EQ(sync_->Acquire(r0).state, VolumeSync::Lookup::kPending);
  sync_->Drain();
  ASSERT_EQ(sync_->Acquire(r0).state, VolumeSync::Lookup::kReady);
  ASSERT_EQ(sync_->Acquire(r1).state, VolumeSync::Lookup::kReady);
  EXPECT_TRUE(fs::is_directory(Dir("7", "data")));
  EXPECT_TRUE(fs::is_empty(Dir("7", "data")));
  sync_->RankStarted(r0.key);
  sync_->RankStarted(r1.key);
  { std::ofstream(Dir("7", "data") + "/hello.txt") << "written by job 7\n"; }
  sync_->RankEnded(r0.key);
  sync_->Drain();
  EXPECT_EQ(transport_->stores_, 0);  // rank 1 still runs
  sync_->RankEnded(r1.key);
  sync_->Drain();
  EXPECT_EQ(transport_->stores_, 1);  // the read-only one is never stored
  EXPECT_TRUE(transport_->reports_.empty());  // nor reported
  EXPECT_FALSE(fs::exists(root_ / "work/jobs/7/attempt-1/volumes"));

  // The next job gets that content, and stores nothing when it changed nothing.
  RankTarget next = Target("8", 0, {{"data", "/mnt", false}});
  EXPECT_EQ(sync_->Acquire(next).state, VolumeSync::Lookup::kPending);
  sync_->Drain();
  ASSERT_EQ(sync_->Acquire(next).state, VolumeSync::Lookup::kReady);
  EXPECT_EQ(Read(Dir("8", "data") + "/hello.txt"), "written by job 7\n");
  sync_->RankStarted(next.key);
  sync_->RankEnded(next.key);
  sync_->Drain();
  EXPECT_EQ(transport_->stores_, 1);
  // ...but says so, from the generation it fetched, so that no next attempt waits.
  EXPECT_EQ(transport_->reports_, (std::vector<std::string>{"8/1/data@1"}));

  // An attempt whose volumes were fetched but whose ranks never started here
  // neither stores nor reports (the coordinator saw no rank start, owes nothing).
  RankTarget idle = Target("11", 0, {{"data", "/mnt", false}});
  sync_->Acquire(idle);
  sync_->Drain();
  sync_->RankEnded(idle.key);
  sync_->Drain();
  EXPECT_EQ(transport_->stores_, 1);
  EXPECT_EQ(transport_->reports_, (std::vector<std::string>{"8/1/data@1"}));
}

TEST_F(VolumeSyncTest, AFailedFetchNamesTheVolumeAndAFailedStoreIsTold) {
  RankTarget broken = Target("9", 0, {{"broken", "/mnt", false}});
  sync_->Acquire(broken);
  sync_->Drain();
  VolumeSync::Lookup l = sync_->Acquire(broken);
  EXPECT_EQ(l.state, VolumeSync::Lookup::kFailed);
  EXPECT_EQ(l.error, "cannot fetch volume 'broken': no route");

  RankTarget w = Target("10", 0, {{"data", "/mnt", false}});
  sync_->Acquire(w);
  sync_->Drain();
  sync_->RankStarted(w.key);
  { std::ofstream(Dir("10", "data") + "/x") << "x"; }
  {
    absl::MutexLock lock(&transport_->mu_);
    transport_->refuse_ = true;
  }
  sync_->RankEnded(w.key);
  sync_->Drain();
  EXPECT_EQ(transport_->stores_, 0);
  EXPECT_EQ(transport_->reports_, (std::vector<std::string>{"10/1/data@0"}));  // the refusal ends the wait too
  EXPECT_EQ(Read((root_ / "work/jobs/10/attempt-1/rank-0.log").string()),
            "athanor-agent: volume 'data' was not synced up; it keeps its content of generation 0: volume is at "
            "generation 9\n");
}

}  // namespace
}  // namespace athanor::agent
