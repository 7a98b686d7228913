// Volumes in the cluster state: the mount rules at submission (tenant
// isolation, single-node read-write, one writer), removal refused while
// mounted, the agents' fetch and store rules, and the records' way into the
// store's batch and back after a restart, and a requeued job's wait for the
// volume stores its ended attempt owes.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/test_util.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class ClusterVolumesTest : public ::testing::Test {
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
    ASSERT_TRUE(state_->volumes().Create("a", "data", kGiB, VolumeQuota{}).ok());
  }
  absl::StatusOr<SubmitResult> Submit(const std::string& tenant, int nodes, std::vector<VolumeMount> mounts,
                                      const std::string& key = "") {
    JobSpec s;
    s.nodes = nodes;
    s.gpus_per_node = 1;
    s.tenant = tenant;
    s.command = {"train"};
    s.volumes = std::move(mounts);
    return state_->SubmitJob(s, key);
  }
  const JobRecord& Job(const std::string& id) { return *state_->jobs().Find(id); }

  FakeClock clock_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(ClusterVolumesTest, SubmitChecksTenantNodesAndOneWriter) {
  EXPECT_EQ(Submit("b", 1, {{"data", "/data", false}}).status(),
            absl::NotFoundError("spec.volumes: tenant b has no volume 'data'"));
  EXPECT_EQ(Submit("a", 2, {{"data", "/data", false}}).status(),
            absl::InvalidArgumentError("spec.volumes: volume 'data' is mounted read-write by a job of 2 nodes; "
                                       "read-write volumes are single-node (ReadWriteOnce): use --nodes 1 or "
                                       "mount it :ro"));
  EXPECT_EQ(Submit("a", 1, {{"data", "data", false}}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<SubmitResult> w = Submit("a", 1, {{"data", "/data", false}}, "k1");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(Job(w->job_id).state, JobState::kStarting);
  EXPECT_EQ(Submit("a", 1, {{"data", "/other", false}}).status(),
            absl::FailedPreconditionError(absl::StrCat("spec.volumes: volume 'data' is mounted read-write by job ",
                                                       w->job_id, " (queued or running); a volume has one writer "
                                                       "at a time")));
  // The same key is the same job, not a second writer.
  absl::StatusOr<SubmitResult> again = Submit("a", 1, {{"data", "/data", false}}, "k1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  // Readers share it, on any number of nodes (this one queues: n1 is held).
  absl::StatusOr<SubmitResult> r = Submit("a", 2, {{"data", "/in", true}});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<rpc::Volume> listed = ClusterVolumes::List(*state_, "a");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(std::vector<std::string>(listed[0].used_by().begin(), listed[0].used_by().end()),
            (std::vector<std::string>{w->job_id, r->job_id}));
  EXPECT_TRUE(ClusterVolumes::List(*state_, "b").empty());

  EXPECT_EQ(state_->volumes().Remove("a", "data").status(),
            absl::FailedPreconditionError(absl::StrCat("volume 'data' is mounted by job ", w->job_id, ", job ",
                                                       r->job_id, " (queued or running): cancel or wait for "
                                                       "them first")));
  ASSERT_TRUE(state_->CancelJob(w->job_id).ok());
  ASSERT_TRUE(state_->CancelJob(r->job_id).ok());
  // Cancelled: stopping until its ranks are settled, then no longer a user.
  for (const char* node : {"n1", "n2"}) ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), {}));
  EXPECT_EQ(Job(w->job_id).state, JobState::kCancelled);
  absl::StatusOr<rpc::Volume> gone = state_->volumes().Remove("a", "data");
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->name(), "data");
}

TEST_F(ClusterVolumesTest, AgentsFetchAndStoreOnlyForTheirPlacedMounts) {
  absl::StatusOr<SubmitResult> w = Submit("a", 1, {{"data", "/data", false}});
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string job = w->job_id;
  const std::string node = Job(job).allocation.at(0).node;
  const std::string other = node == "n1" ? "n2" : "n1";
  std::vector<DesiredRank> desired = ClusterAgents::DesiredFor(*state_, node);
  ASSERT_EQ(desired.size(), 1u);
  EXPECT_EQ(desired[0].volumes, (std::vector<VolumeMount>{{"data", "/data", false}}));

  absl::StatusOr<rpc::Volume> f = ClusterVolumes::ForFetch(*state_, node, job, 1, "data");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->generation(), 0);
  EXPECT_EQ(ClusterVolumes::ForFetch(*state_, other, job, 1, "data").status(),
            absl::PermissionDeniedError(absl::StrCat("node ", other, " may not fetch volume 'data' for job ", job,
                                                     " attempt 1: the attempt has no rank there")));
  EXPECT_EQ(ClusterVolumes::ForFetch(*state_, node, job, 1, "else").status(),
            absl::PermissionDeniedError(absl::StrCat("node ", node, " may not fetch volume 'else' for job ", job,
                                                     " attempt 1: the job does not mount it")));
  EXPECT_EQ(ClusterVolumes::ForFetch(*state_, node, job, 2, "data").status(),
            absl::PermissionDeniedError(absl::StrCat("node ", node, " may not fetch volume 'data' for job ", job,
                                                     " attempt 2: no such attempt")));

  absl::StatusOr<VolumeUpload> up = state_->volumes().ReserveStore(node, job, 1, "data", 0);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->tenant, "a");
  EXPECT_EQ(up->generation, 1);
  EXPECT_EQ(up->size_limit_bytes, kGiB);
  state_->TakeChanges();
  absl::StatusOr<rpc::Volume> v = state_->volumes().CommitStore("data", *up, 0, "sha256:aa", 2048);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->generation(), 1);
  Changes c = state_->TakeChanges();
  ASSERT_EQ(c.volumes.size(), 1u);
  EXPECT_FALSE(c.volumes[0].removed);
  EXPECT_EQ(c.volumes[0].volume.digest(), "sha256:aa");
  EXPECT_EQ(state_->volumes().ReserveStore(node, job, 1, "data", 0).status(),
            absl::AbortedError("volume 'data' is at generation 1, not 0: another job stored it since"));

  // A read-only mount may fetch but never store.
  absl::StatusOr<SubmitResult> r = Submit("a", 1, {{"data", "/in", true}});
  ASSERT_TRUE(r.ok());
  const JobRecord& rj = Job(r->job_id);
  ASSERT_EQ(rj.allocation.size(), 1u);
  EXPECT_EQ(state_->volumes().ReserveStore(rj.allocation[0].node, r->job_id, 1, "data", 1).status(),
            absl::PermissionDeniedError(absl::StrCat("node ", rj.allocation[0].node, " may not store volume 'data' "
                                                     "for job ", r->job_id, " attempt 1: the job mounts it "
                                                     "read-only")));

  // The records come back after a restart, without the view's used_by.
  ClusterState restarted(StateOptions{}, &clock_);
  std::vector<rpc::Volume> rows = ClusterVolumes::List(*state_, "");
  ASSERT_TRUE(restarted.volumes().Restore(rows).ok());
  std::vector<rpc::Volume> back = ClusterVolumes::List(restarted, "a");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].generation(), 1);
  EXPECT_EQ(back[0].used_by_size(), 0);
}

// A requeued job's next attempt is not placed while its ended attempt still
// owes the store of a read-write volume (volumes/owed_stores.h): it would
// fetch the older generation, and its own store would then be refused.
class OwedStoreTest : public ClusterVolumesTest {
 protected:
  // Submits a job mounting `data` read-write, runs its rank, preempts it and
  // reports the rank's exit: the job is requeued. Its node in `*node`.
  std::string RunAndPreempt(std::string* node) {
    absl::StatusOr<SubmitResult> w = Submit("a", 1, {{"data", "/data", false}});
    EXPECT_TRUE(w.ok()) << w.status();
    *node = Job(w->job_id).allocation.at(0).node;
    const DesiredRank d = ClusterAgents::DesiredFor(*state_, *node).at(0);
    EXPECT_TRUE(state_->agents().Heartbeat(*node, state_->log().generation(), {ReportOf(d)}));
    EXPECT_TRUE(state_->jobs().Preempt(w->job_id, Seconds(10)).ok());
    EXPECT_TRUE(state_->agents().Heartbeat(*node, state_->log().generation(), {ReportOf(d, RankPhase::kExited)}));
    return w->job_id;
  }
  // Lets `seconds` pass with `nodes` heartbeating, then ticks.
  void Pass(int seconds, std::vector<std::string> nodes = {"n1", "n2"}) {
    for (int s = 0; s < seconds; ++s) {
      clock_.Advance(Seconds(1));
      for (const std::string& n : nodes) ASSERT_TRUE(state_->agents().Heartbeat(n, state_->log().generation(), {}));
    }
    state_->Tick();
  }
};

TEST_F(OwedStoreTest, TheNextAttemptWaitsForTheStoreReport) {
  std::string node;
  const std::string job = RunAndPreempt(&node);
  const std::string other = node == "n1" ? "n2" : "n1";
  EXPECT_EQ(Job(job).state, JobState::kPending);  // both nodes are free; it waits
  EXPECT_EQ(state_->Why(job)->reasons.at(0),
            absl::StrCat("waiting for volume 'data' to be synced from node ", node,
                         " (stored back by attempt 1); gives up in 600 s"));
  // Only the owing node's call counts; a pass changes nothing meanwhile.
  EXPECT_EQ(state_->volumes().EndStore(other, job, 1, "data"),
            absl::PermissionDeniedError(absl::StrCat("node ", other, " may not store volume 'data' for job ", job,
                                                     " attempt 1: the attempt has no rank there")));
  Pass(30);
  EXPECT_EQ(Job(job).state, JobState::kPending);
  EXPECT_EQ(state_->Why(job)->reasons.at(0),
            absl::StrCat("waiting for volume 'data' to be synced from node ", node,
                         " (stored back by attempt 1); gives up in 570 s"));
  // The store call ends (here: an unchanged copy's report): placed at once.
  ASSERT_TRUE(state_->volumes().EndStore(node, job, 1, "data").ok());
  EXPECT_EQ(Job(job).state, JobState::kStarting);
  EXPECT_EQ(Job(job).attempt, 2);
  // A second report of the same store is harmless.
  EXPECT_TRUE(state_->volumes().EndStore(node, job, 1, "data").ok());
  EXPECT_EQ(Job(job).attempt, 2);
}

TEST_F(OwedStoreTest, AStoreThatEndedBeforeTheRanksWereSeenToEndCounts) {
  absl::StatusOr<SubmitResult> w = Submit("a", 1, {{"data", "/data", false}});
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string node = Job(w->job_id).allocation.at(0).node;
  const DesiredRank d = ClusterAgents::DesiredFor(*state_, node).at(0);
  ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), {ReportOf(d)}));
  ASSERT_TRUE(state_->jobs().Preempt(w->job_id, Seconds(10)).ok());
  // The agent stores as the rank ends, before its heartbeat says so.
  ASSERT_TRUE(state_->volumes().EndStore(node, w->job_id, 1, "data").ok());
  ASSERT_TRUE(state_->agents().Heartbeat(node, state_->log().generation(), {ReportOf(d, RankPhase::kExited)}));
  EXPECT_EQ(Job(w->job_id).state, JobState::kStarting);
  EXPECT_EQ(Job(w->job_id).attempt, 2);
}

TEST_F(OwedStoreTest, ANodeGoneDownOwesNothing) {
  std::string node;
  const std::string job = RunAndPreempt(&node);
  const std::string other = node == "n1" ? "n2" : "n1";
  EXPECT_EQ(Job(job).state, JobState::kPending);
  // The owing node stops heartbeating; the other keeps on. DOWN after 10 s.
  for (int s = 0; s < 10; ++s) {
    Pass(1, {other});
    ASSERT_EQ(Job(job).state, JobState::kPending) << "after " << s + 1 << " s";
  }
  Pass(1, {other});
  EXPECT_TRUE(state_->nodes().IsDown(node));
  EXPECT_EQ(Job(job).state, JobState::kStarting);
  EXPECT_EQ(Job(job).attempt, 2);
  EXPECT_EQ(Job(job).allocation.at(0).node, other);
}

TEST_F(OwedStoreTest, TheWaitHasABound) {
  std::string node;
  const std::string job = RunAndPreempt(&node);
  Pass(599);
  EXPECT_EQ(Job(job).state, JobState::kPending);
  EXPECT_EQ(state_->Why(job)->reasons.at(0),
            absl::StrCat("waiting for volume 'data' to be synced from node ", node,
                         " (stored back by attempt 1); gives up in 1 s"));
  Pass(1);
  EXPECT_EQ(Job(job).state, JobState::kStarting);
  EXPECT_EQ(Job(job).attempt, 2);
}

}  // namespace
}  // namespace athanor::coord

namespace athanor::coord {
namespace {

// The `volumes` table: written, replaced, deleted in one batch's order, read back.
TEST(VolumeRows, RoundTripThroughSqlite) {
  const std::string path = ::testing::TempDir() + "/volumes-" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  rpc::Volume v;
  v.set_tenant("a");
  v.set_name("data");
  v.set_size_limit_bytes(1024);
  v.add_used_by("3");  // a view: never stored
  rpc::Volume gone = v;
  gone.set_name("old");
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    Changes c;
    c.volumes = {{gone, false}, {v, false}};
    ASSERT_TRUE((*store)->Commit(c).ok());
    v.set_generation(2);
    v.add_snapshots()->set_name("s");
    Changes d;
    d.volumes = {{v, false}, {gone, true}};
    ASSERT_TRUE((*store)->Commit(d).ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Store::Contents> back = (*store)->LoadAll();
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->volumes.size(), 1u);
  EXPECT_EQ(back->volumes[0].name(), "data");
  EXPECT_EQ(back->volumes[0].generation(), 2);
  EXPECT_EQ(back->volumes[0].snapshots_size(), 1);
  EXPECT_EQ(back->volumes[0].used_by_size(), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace athanor::coord
