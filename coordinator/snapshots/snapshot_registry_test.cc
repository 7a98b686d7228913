#include "coordinator/snapshots/snapshot_registry.h"

#include "gtest/gtest.h"

namespace athanor::coord {
namespace {

rpc::VolumeSnapshotRef Mount(const std::string& volume, const std::string& path, bool read_only) {
  rpc::VolumeSnapshotRef v;
  v.set_volume(volume);
  v.set_path(path);
  v.set_read_only(read_only);
  return v;
}

TEST(SnapshotRegistryTest, CompleteOnceEveryWorkdirAndReadWriteVolumeIsIn) {
  SnapshotRegistry reg;
  rpc::JobSpec spec;
  spec.set_gpus_per_node(2);
  absl::StatusOr<rpc::InstanceSnapshot> s =
      reg.Begin("alice", "7", 2, {Mount("data", "/data", false), Mount("ref", "/ref", true)}, spec,
                "reclaimed: idle", 100, 5, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id(), "snap-7-1");
  EXPECT_EQ(s->workdir_keys_size(), 2);
  EXPECT_EQ(s->workdir_keys(0), "");
  EXPECT_FALSE(s->complete());
  EXPECT_EQ(SnapshotWorkdirKey("alice", "snap-7-1", 1), "snapshots/alice/snap-7-1/rank-1.tar");
  ASSERT_NE(reg.Pending("7"), nullptr);
  EXPECT_EQ(reg.Pending("7")->id(), "snap-7-1");

  s = reg.WorkdirStored("snap-7-1", 0, 1000);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->workdir_keys(0), "snapshots/alice/snap-7-1/rank-0.tar");
  EXPECT_EQ(reg.WorkdirStored("snap-7-1", 0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reg.WorkdirStored("snap-7-1", 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  s = reg.WorkdirStored("snap-7-1", 1, 24);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size_bytes(), 1024);
  EXPECT_FALSE(s->complete());  // the read-write volume is not in yet
  EXPECT_EQ(reg.NewestComplete("alice", "7").status().code(), absl::StatusCode::kNotFound);

  s = reg.VolumeSnapshotted("snap-7-1", "data", "snap-7-1");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->complete());
  EXPECT_EQ(reg.Pending("7"), nullptr);
  absl::StatusOr<rpc::InstanceSnapshot> newest = reg.NewestComplete("alice", "7");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->id(), "snap-7-1");
  EXPECT_EQ(newest->spec().gpus_per_node(), 2);
  EXPECT_EQ(reg.NewestComplete("bob", "7").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.VolumeSnapshotted("snap-7-1", "other", "x").status().code(), absl::StatusCode::kNotFound);
}

TEST(SnapshotRegistryTest, RetentionKeepsTheNewestPerTenant) {
  SnapshotRegistry reg;
  std::vector<rpc::InstanceSnapshot> evicted;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(reg.Begin("alice", "9", 1, {}, {}, "idle", 100 + i, 3, &evicted).ok());
  }
  ASSERT_TRUE(reg.Begin("bob", "10", 1, {}, {}, "idle", 50, 3, &evicted).ok());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].id(), "snap-9-1");
  std::vector<rpc::InstanceSnapshot> alice = reg.List("alice");
  ASSERT_EQ(alice.size(), 3u);
  EXPECT_EQ(alice[0].id(), "snap-9-2");
  EXPECT_EQ(alice[2].id(), "snap-9-4");
  EXPECT_EQ(reg.List("").size(), 4u);
  EXPECT_EQ(reg.List("bob").size(), 1u);

  // Numbers are never reused within a process, nor after a restart.
  ASSERT_TRUE(reg.Remove("snap-9-4").ok());
  absl::StatusOr<rpc::InstanceSnapshot> s = reg.Begin("alice", "9", 1, {}, {}, "idle", 200, 3, &evicted);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->id(), "snap-9-5");
  SnapshotRegistry again;
  ASSERT_TRUE(again.Restore(reg.List("")).ok());
  s = again.Begin("alice", "9", 1, {}, {}, "idle", 300, 3, &evicted);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->id(), "snap-9-6");
  EXPECT_EQ(evicted.back().id(), "snap-9-2");
  EXPECT_EQ(again.Remove("snap-9-2").status().code(), absl::StatusCode::kNotFound);
}

TEST(SnapshotRegistryTest, RefusesBadInput) {
  SnapshotRegistry reg;
  EXPECT_EQ(reg.Begin("alice", "1", 0, {}, {}, "", 1, 5, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Begin("a/b", "1", 1, {}, {}, "", 1, 5, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  rpc::InstanceSnapshot row;
  row.set_id("snap-1-1");
  row.set_tenant("alice");
  row.set_job_id("1");
  EXPECT_EQ(reg.Restore({row}).code(), absl::StatusCode::kInvalidArgument);  // no ranks
}

}  // namespace
}  // namespace athanor::coord
