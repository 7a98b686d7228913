// Instance snapshots in the cluster state: a reclaimed job's snapshot, the
// keys its stopping ranks are handed, the agents' store rules, the read-write
// volume kept once its store ended, the restore rules at submission, and
// removal with what it leaves to delete.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <memory>
#include <string>
#include <vector>

#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {
namespace {

class ClusterSnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StateOptions o;
    o.min_run_time = Duration::zero();
    state_ = std::make_unique<ClusterState>(o, &clock_);
    for (const char* name : {"n1", "n2"}) {
      NodeRecord n;
      n.name = name;
      n.host = name;
      n.inventory.gpus = 1;
      ASSERT_TRUE(state_->agents().Register(n, {}).ok());
    }
    ASSERT_TRUE(state_->volumes().Create("a", "data", int64_t{1} << 30, VolumeQuota{}).ok());
  }
  JobSpec Spec(const std::string& tenant, bool interactive, std::vector<VolumeMount> mounts) {
    JobSpec s;
    s.tenant = tenant;
    s.gpus_per_node = 1;
    s.command = {"sleep", "infinity"};
    s.interactive = interactive;
    s.idle_timeout_s = 60;
    s.volumes = std::move(mounts);
    return s;
  }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterSnapshotsTest, AReclaimedJobsWorkDirsAndVolumeMakeACompleteSnapshot) {
  absl::StatusOr<SubmitResult> sub = state_->SubmitJob(Spec("a", true, {{"data", "/data", false}}));
  ASSERT_TRUE(sub.ok()) << sub.status();
  const std::string job = sub->job_id;
  JobRecord* rec = state_->jobs().Mutable(job);
  ASSERT_TRUE(rec->allocated);
  const std::string node = rec->allocation[0].node;
  const std::string other = node == "n1" ? "n2" : "n1";
  absl::StatusOr<rpc::InstanceSnapshot> s = state_->snapshots().Take(*rec, "reclaimed: idle for 61 s");
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string id = "snap-" + job + "-1";
  const std::string key = "snapshots/a/" + id + "/rank-0.tar";
  EXPECT_EQ(s->id(), id);
  EXPECT_EQ(s->spec().idle_timeout_s(), 60);
  state_->jobs().BeginStop(rec, JobState::kCancelled, "reclaimed: idle for 61 s");
  std::vector<DesiredRank> desired = ClusterAgents::DesiredFor(*state_, node);
  ASSERT_EQ(desired.size(), 1u);
  EXPECT_EQ(desired[0].snapshot_key, key);
  EXPECT_TRUE(desired[0].terminate);

  // Only the node that ran the rank, only with the key it was handed.
  EXPECT_EQ(ClusterSnapshots::ForStore(*state_, other, job, 1, 0, key).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ClusterSnapshots::ForStore(*state_, node, job, 1, 0, "snapshots/a/x/rank-0.tar").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ClusterSnapshots::ForStore(*state_, node, job, 2, 0, key).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<WorkdirUpload> up = ClusterSnapshots::ForStore(*state_, node, job, 1, 0, key);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->snapshot_id, id);
  EXPECT_EQ(up->tenant, "a");
  s = state_->snapshots().WorkdirStored(id, 0, 4096);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->complete());  // the volume's store has not ended yet
  EXPECT_EQ(ClusterSnapshots::ForStore(*state_, node, job, 1, 0, key).status().code(),
            absl::StatusCode::kPermissionDenied);  // stored once

  // Not yet complete: nobody restores it.
  JobSpec restore = Spec("a", true, {{"data", "/data", false}});
  restore.restore_snapshot = id;
  EXPECT_EQ(state_->snapshots().CheckSubmit(restore).code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(state_->volumes().EndStore(node, job, 1, "data").ok());
  std::vector<rpc::InstanceSnapshot> listed = ClusterSnapshots::List(*state_, "a");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].complete());
  EXPECT_EQ(listed[0].size_bytes(), 4096);
  EXPECT_EQ(listed[0].volumes(0).snapshot(), id);
  EXPECT_EQ(ClusterVolumes::List(*state_, "a")[0].snapshots(0).name(), id);
  Changes c = state_->TakeChanges();
  ASSERT_FALSE(c.snapshots.empty());
  EXPECT_TRUE(c.snapshots.back().snapshot.complete());

  // The restore rules.
  EXPECT_TRUE(state_->snapshots().CheckSubmit(restore).ok());
  JobSpec theirs = restore;
  theirs.tenant = "b";
  EXPECT_EQ(state_->snapshots().CheckSubmit(theirs), absl::NotFoundError("tenant b has no snapshot '" + id + "'"));
  JobSpec batch = restore;
  batch.interactive = false;
  EXPECT_EQ(state_->snapshots().CheckSubmit(batch).code(), absl::StatusCode::kInvalidArgument);
  JobSpec moved = Spec("a", true, {{"data", "/elsewhere", false}});
  moved.restore_snapshot = id;
  EXPECT_EQ(state_->snapshots().CheckSubmit(moved),
            absl::InvalidArgumentError("snapshot " + id + " holds volume 'data' at /data read-write; mount it the "
                                       "same way (or give no --volume, to take the snapshot's)"));

  // Removal: another tenant's reads as absent; the owner's leaves its blobs.
  EXPECT_EQ(state_->snapshots().Remove("b", id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(state_->snapshots().Remove("a", id).ok());
  EXPECT_EQ(state_->snapshots().TakeOrphans(), std::vector<std::string>{key});
  EXPECT_TRUE(ClusterVolumes::List(*state_, "a")[0].snapshots().empty());
  EXPECT_TRUE(ClusterSnapshots::List(*state_, "").empty());
}

// The `snapshots` table: rows written, replaced and deleted in order, read
// back after a restart, and the registry restored from them.
TEST(SnapshotStoreTest, RowsSurviveARestart) {
  const std::string path = ::testing::TempDir() + "/snapshots-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  rpc::InstanceSnapshot s;
  s.set_id("snap-7-1");
  s.set_tenant("a");
  s.set_job_id("7");
  s.add_workdir_keys("");
  rpc::InstanceSnapshot gone = s;
  gone.set_id("snap-7-2");
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    Changes c;
    c.snapshots = {{s, false}, {gone, false}};
    ASSERT_TRUE((*store)->Commit(c).ok());
    s.set_workdir_keys(0, "snapshots/a/snap-7-1/rank-0.tar");
    s.set_complete(true);
    Changes d;
    d.snapshots = {{s, false}, {gone, true}};
    ASSERT_TRUE((*store)->Commit(d).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Store::Contents> back = (*store)->LoadAll();
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->snapshots.size(), 1u);
  EXPECT_EQ(back->snapshots[0].id(), "snap-7-1");
  EXPECT_TRUE(back->snapshots[0].complete());
  EXPECT_EQ(back->snapshots[0].workdir_keys(0), "snapshots/a/snap-7-1/rank-0.tar");
  FakeClock clock;
  ClusterState state(StateOptions{}, &clock);
  ASSERT_TRUE(state.snapshots().Restore(back->snapshots).ok());
  EXPECT_EQ(ClusterSnapshots::List(state, "a").size(), 1u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace athanor::coord
