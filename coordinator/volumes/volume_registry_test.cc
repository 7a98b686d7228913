#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/volumes/volume_mounts.h"
#include "coordinator/volumes/volume_registry.h"
#include "gtest/gtest.h"

namespace athanor::coord {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kNow = 1796083200;

JobSpec SpecOf(const std::string& tenant, int32_t nodes, std::vector<VolumeMount> mounts) {
  JobSpec s;
  s.tenant = tenant;
  s.nodes = nodes;
  s.command = {"true"};
  s.volumes = std::move(mounts);
  return s;
}

TEST(VolumeRegistry, CreateListAndQuotas) {
  VolumeRegistry r;
  VolumeQuota q{3 * kGiB, 2};
  absl::StatusOr<rpc::Volume> v = r.Create("a", "data", 2 * kGiB, q, kNow);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->generation(), 0);
  EXPECT_EQ(v->size_limit_bytes(), 2 * kGiB);
  EXPECT_EQ(v->created_unix(), kNow);
  EXPECT_EQ(r.Create("a", "data", kGiB, q, kNow).status(),
            absl::AlreadyExistsError("tenant a already has a volume 'data'"));
  EXPECT_EQ(r.Create("a", "big", 2 * kGiB, q, kNow).status(),
            absl::ResourceExhaustedError("volume 'big' (2147483648 bytes) would bring tenant a's volumes to "
                                         "4294967296 bytes; its quota is 3221225472 bytes"));
  ASSERT_TRUE(r.Create("a", "w", kGiB, q, kNow).ok());
  EXPECT_EQ(r.Create("a", "x", 1, q, kNow).status(),
            absl::ResourceExhaustedError("tenant a holds 2 volumes; its quota is 2"));
  // Another tenant's quota is its own, and the same name is another volume.
  ASSERT_TRUE(r.Create("b", "data", 3 * kGiB, q, kNow).ok());
  std::vector<rpc::Volume> a = r.List("a");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name(), "data");
  EXPECT_EQ(a[1].name(), "w");
  EXPECT_EQ(r.List("").size(), 3u);
  EXPECT_EQ(r.List("c").size(), 0u);
}

TEST(VolumeRegistry, RefusesBadNamesAndSizes) {
  VolumeRegistry r;
  VolumeQuota q;
  EXPECT_EQ(r.Create("a", "a/b", kGiB, q, kNow).status(),
            absl::InvalidArgumentError("name: may hold only letters, digits, '.', '_' and '-'"));
  EXPECT_EQ(r.Create("a", "..", kGiB, q, kNow).status(), absl::InvalidArgumentError("name: '..' is not a name"));
  EXPECT_EQ(r.Create("a", std::string(129, 'x'), kGiB, q, kNow).status(),
            absl::InvalidArgumentError("name: is 129 bytes; at most 128"));
  EXPECT_EQ(r.Create("a", "v", 0, q, kNow).status(),
            absl::InvalidArgumentError("size_limit_bytes: 0 is not in 1..1125899906842624 (1 PiB)"));
  EXPECT_EQ(r.Create("..", "v", 1, q, kNow).status(), absl::InvalidArgumentError("tenant: '..' is not a name"));
}

TEST(VolumeRegistry, GenerationsAndSnapshots) {
  VolumeRegistry r;
  ASSERT_TRUE(r.Create("a", "data", 100, VolumeQuota{}, kNow).ok());
  EXPECT_EQ(VolumeBlobKey("a", "data", 3), "volumes/a/data/3.tar");
  absl::StatusOr<int64_t> g1 = r.ReserveGeneration("a", "data", 0);
  absl::StatusOr<int64_t> g2 = r.ReserveGeneration("a", "data", 0);
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_EQ(*g1, 1);
  EXPECT_EQ(*g2, 2);  // two uploads never share a blob key
  EXPECT_EQ(r.CommitGeneration("a", "data", 0, *g1, "sha256:x", 101, kNow).status(),
            absl::ResourceExhaustedError("volume 'data': 101 bytes pass its size limit of 100 bytes"));
  absl::StatusOr<rpc::Volume> v = r.CommitGeneration("a", "data", 0, *g1, "sha256:x", 60, kNow + 5);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->generation(), 1);
  EXPECT_EQ(v->used_bytes(), 60);
  EXPECT_EQ(v->synced_unix(), kNow + 5);
  // The second upload started from generation 0 too: it lost the race.
  EXPECT_EQ(r.CommitGeneration("a", "data", 0, *g2, "sha256:y", 60, kNow).status(),
            absl::AbortedError("volume 'data' is at generation 1, not 0: another job stored it since"));
  EXPECT_EQ(r.ReserveGeneration("a", "data", 0).status(),
            absl::AbortedError("volume 'data' is at generation 1, not 0: another job stored it since"));
  EXPECT_EQ(*r.ReserveGeneration("a", "data", 1), 3);

  absl::StatusOr<rpc::Volume> s = r.Snapshot("a", "data", "before", kNow + 6);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->snapshots_size(), 1);
  EXPECT_EQ(s->snapshots(0).generation(), 1);
  EXPECT_EQ(s->snapshots(0).digest(), "sha256:x");
  EXPECT_EQ(r.Snapshot("a", "data", "before", kNow).status(),
            absl::AlreadyExistsError("volume 'data' already has a snapshot 'before'"));
  EXPECT_EQ(r.Snapshot("b", "data", "s", kNow).status(), absl::NotFoundError("tenant b has no volume 'data'"));
  ASSERT_TRUE(r.CommitGeneration("a", "data", 1, 3, "sha256:z", 10, kNow).ok());
  EXPECT_TRUE(VolumeRegistry::Referenced(*r.Find("a", "data"), 1));   // the snapshot's
  EXPECT_FALSE(VolumeRegistry::Referenced(*r.Find("a", "data"), 2));
  EXPECT_EQ(VolumeRegistry::Blobs(*r.Find("a", "data")), (std::vector<int64_t>{1, 3}));

  absl::StatusOr<rpc::Volume> gone = r.Remove("a", "data");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(r.Find("a", "data"), nullptr);
  EXPECT_EQ(r.CommitGeneration("a", "data", 3, 4, "sha256:w", 1, kNow).status(),
            absl::NotFoundError("tenant a has no volume 'data'"));
}

TEST(VolumeRegistry, RestoreRefusesDuplicates) {
  rpc::Volume v;
  v.set_tenant("a");
  v.set_name("data");
  v.add_used_by("7");
  VolumeRegistry r;
  EXPECT_EQ(r.Restore({v, v}), absl::InvalidArgumentError("volume row a/data: a duplicate"));
  VolumeRegistry ok;
  ASSERT_TRUE(ok.Restore({v}).ok());
  EXPECT_EQ(ok.Find("a", "data")->used_by_size(), 0);
}

TEST(VolumeMounts, TenantIsolationSingleNodeAndOneWriter) {
  VolumeRegistry r;
  ASSERT_TRUE(r.Create("a", "data", 100, VolumeQuota{}, kNow).ok());
  std::vector<VolumeUse> uses;
  // Another tenant's volume reads as a missing one.
  EXPECT_EQ(CheckMounts(r, SpecOf("b", 1, {{"data", "/data", true}}), uses),
            absl::NotFoundError("spec.volumes: tenant b has no volume 'data'"));
  EXPECT_EQ(CheckMounts(r, SpecOf("a", 1, {{"nope", "/data", true}}), uses),
            absl::NotFoundError("spec.volumes: tenant a has no volume 'nope'"));
  EXPECT_EQ(CheckMounts(r, SpecOf("a", 2, {{"data", "/data", false}}), uses),
            absl::InvalidArgumentError("spec.volumes: volume 'data' is mounted read-write by a job of 2 nodes; "
                                       "read-write volumes are single-node (ReadWriteOnce): use --nodes 1 or "
                                       "mount it :ro"));
  EXPECT_TRUE(CheckMounts(r, SpecOf("a", 2, {{"data", "/data", true}}), uses).ok());
  EXPECT_TRUE(CheckMounts(r, SpecOf("a", 1, {{"data", "/data", false}}), uses).ok());

  uses.push_back({"12", "a", {{"data", "/data", false}}});
  uses.push_back({"13", "a", {{"data", "/in", true}}});
  uses.push_back({"14", "b", {{"data", "/in", false}}});  // b's own volume of that name
  EXPECT_EQ(CheckMounts(r, SpecOf("a", 1, {{"data", "/x", false}}), uses),
            absl::FailedPreconditionError("spec.volumes: volume 'data' is mounted read-write by job 12 (queued or "
                                          "running); a volume has one writer at a time"));
  EXPECT_TRUE(CheckMounts(r, SpecOf("a", 3, {{"data", "/x", true}}), uses).ok());
  EXPECT_EQ(UsersOf(uses, "a", "data"), (std::vector<std::string>{"12", "13"}));
  EXPECT_EQ(UsersOf(uses, "a", "data", true), (std::vector<std::string>{"12"}));
}

}  // namespace
}  // namespace athanor::coord
