// Images in the coordinator's state: a submitted job's image resolves to a
// digest under the submission's lock (the tenant's own image, else a public
// one; refused otherwise), the digest reaches the job's desired ranks and
// survives a restart with the image records (SQLite), and an image is not
// removed while a job runs it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "coordinator/core/cluster_state.h"
#include "coordinator/core/core_images.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/store/fake_store.h"
#include "coordinator/store/sqlite/sqlite_store.h"

namespace athanor::coord {
namespace {

const int kWatchdog = (alarm(60), 0);

std::string Digest(char c) { return "sha256:" + std::string(64, c); }

rpc::Image MakeImage(const std::string& tenant, const std::string& name, char digest,
                     bool is_public = false) {
  rpc::Image image;
  image.set_tenant(tenant);
  image.set_name(name);
  image.set_digest(Digest(digest));
  image.set_size_bytes(10240);
  image.set_public_(is_public);
  return image;
}

JobSpec Spec(const std::string& tenant, const std::string& image) {
  JobSpec s;
  s.tenant = tenant;
  s.nodes = 1;
  s.gpus_per_node = 1;
  s.command = {"train"};
  s.image = image;
  return s;
}

class ClusterImagesTest : public ::testing::Test {
 protected:
  ClusterImagesTest() : state_(StateOptions(), &clock_) {
    NodeRecord n;
    n.name = "n1";
    n.host = "n1";
    n.inventory.gpus = 2;
    EXPECT_TRUE(state_.agents().Register(n, {}).ok());
  }
  FakeClock clock_;
  ClusterState state_;
};

TEST_F(ClusterImagesTest, SubmitResolvesTheOwnImageElseAPublicOneAndPinsItsDigest) {
  ASSERT_TRUE(state_.images().Record(MakeImage("admin", "base", 'e', true), false).ok());
  ASSERT_TRUE(state_.images().Record(MakeImage("alice", "base", 'a'), false).ok());
  absl::StatusOr<SubmitResult> own = state_.SubmitJob(Spec("alice", "base"));
  absl::StatusOr<SubmitResult> pub = state_.SubmitJob(Spec("bob", "base"));
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(state_.jobs().Find(own->job_id)->image_digest, Digest('a'));
  EXPECT_EQ(state_.jobs().Find(pub->job_id)->image_digest, Digest('e'));
  // Both placed on n1 (2 GPUs): each desired rank carries its job's digest.
  std::map<std::string, std::string> digests;
  for (const DesiredRank& d : ClusterAgents::DesiredFor(state_, "n1")) digests[d.job_id] = d.image_digest;
  EXPECT_EQ(digests, (std::map<std::string, std::string>{{own->job_id, Digest('a')},
                                                          {pub->job_id, Digest('e')}}));
  // Replacing the name later changes nothing for the job already submitted.
  ASSERT_TRUE(state_.images().Record(MakeImage("alice", "base", 'b'), true).ok());
  EXPECT_EQ(state_.jobs().Find(own->job_id)->image_digest, Digest('a'));
}

TEST_F(ClusterImagesTest, SubmitRefusesAnUnknownOrHiddenImageNamingIt) {
  ASSERT_TRUE(state_.images().Record(MakeImage("carol", "secret", 'c'), false).ok());
  for (const char* name : {"secret", "nothere"}) {
    absl::StatusOr<SubmitResult> r = state_.SubmitJob(Spec("bob", name));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(r.status().message().find(std::string("image '") + name + "'"), std::string::npos)
        << r.status();
  }
  EXPECT_TRUE(state_.jobs().all().empty());
}

TEST_F(ClusterImagesTest, RemoveIsRefusedWhileAJobRunsTheImageAndFreesTheBlobAfter) {
  ASSERT_TRUE(state_.images().Record(MakeImage("alice", "x", 'a'), false).ok());
  ASSERT_TRUE(state_.images().Record(MakeImage("alice", "y", 'a'), false).ok());  // same content
  absl::StatusOr<SubmitResult> job = state_.SubmitJob(Spec("alice", "x"));
  ASSERT_TRUE(job.ok()) << job.status();
  state_.TakeChanges();
  absl::StatusOr<ClusterImages::Removed> busy = state_.images().Remove("alice", "x");
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(busy.status().message(), "image 'x' of tenant alice is in use by job(s) " + job->job_id +
                                         " (cancel them or wait until they end)");
  EXPECT_TRUE(state_.TakeChanges().images.empty());
  ASSERT_TRUE(state_.CancelJob(job->job_id).ok());
  // Cancelled: its ranks are told to stop; they exit and the job ends.
  std::vector<RankReport> exited;
  for (const DesiredRank& d : ClusterAgents::DesiredFor(state_, "n1")) {
    RankReport r;
    r.job_id = d.job_id;
    r.attempt = d.attempt;
    r.rank = d.rank;
    r.phase = RankPhase::kExited;
    r.signal = 15;
    r.signal_from_agent = true;
    exited.push_back(r);
  }
  ASSERT_TRUE(state_.agents().Heartbeat("n1", state_.log().generation(), exited));
  ASSERT_TRUE(IsTerminal(state_.jobs().Find(job->job_id)->state));
  absl::StatusOr<ClusterImages::Removed> x = state_.images().Remove("alice", "x");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_FALSE(x->blob_unused);  // "y" holds the same digest
  absl::StatusOr<ClusterImages::Removed> y = state_.images().Remove("alice", "y");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(y->blob_unused);
  Changes c = state_.TakeChanges();
  ASSERT_EQ(c.images.size(), 2u);
  EXPECT_TRUE(c.images[0].removed);
  EXPECT_EQ(c.images[1].image.name(), "y");
  EXPECT_EQ(state_.images().Remove("alice", "y").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterImagesTest, AJobGoesToAnEqualNodeThatHasItsImageCached) {
  NodeRecord n2;
  n2.name = "n2";
  n2.host = "n2";
  n2.inventory.gpus = 2;
  ASSERT_TRUE(state_.agents().Register(n2, {}).ok());
  ASSERT_TRUE(state_.images().Record(MakeImage("alice", "x", 'a'), false).ok());
  state_.images().SetCached("n2", {Digest('a')});
  absl::StatusOr<SubmitResult> with = state_.SubmitJob(Spec("alice", "x"));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(state_.jobs().Find(with->job_id)->allocation.at(0).node, "n2");
  absl::StatusOr<SubmitResult> without = state_.SubmitJob(Spec("alice", ""));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(state_.jobs().Find(without->job_id)->allocation.at(0).node, "n2");  // the better fit now
}

TEST(CoreImagesTest, ImagesAndAJobsDigestSurviveARestart) {
  char dir[] = "/tmp/cluster_images_test.XXXXXX";
  const std::string path = std::string(mkdtemp(dir)) + "/state.db";
  FakeClock clock;
  auto open = [&] {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
    EXPECT_TRUE(store.ok()) << store.status();
    auto core = CoordinatorCore::Create(StateOptions(), std::move(*store), &clock, Seconds(3600));
    EXPECT_TRUE(core.ok()) << core.status();
    return std::move(*core);
  };
  std::string job_id;
  {
    std::unique_ptr<CoordinatorCore> core = open();
    CoreImages images(core.get());
    ASSERT_TRUE(images.Record(MakeImage("alice", "gone", 'd'), false).ok());
    ASSERT_TRUE(images.Record(MakeImage("alice", "kept", 'f'), false).ok());
    ASSERT_TRUE(images.Record(MakeImage("admin", "base", 'e', true), false).ok());
    ASSERT_TRUE(images.Remove("alice", "gone").ok());
    NodeRecord n;
    n.name = "n1";
    n.host = "n1";
    n.inventory.gpus = 1;
    ASSERT_TRUE(RegisterAndWait(core.get(), n).ok());
    absl::StatusOr<SubmitResult> r = SubmitAndWait(core.get(), Spec("alice", "kept"));
    ASSERT_TRUE(r.ok()) << r.status();
    job_id = r->job_id;
  }
  std::unique_ptr<CoordinatorCore> core = open();
  CoreImages images(core.get());
  std::string listed;
  for (const rpc::Image& i : images.Visible("alice", false)) listed += i.tenant() + "/" + i.name() + " ";
  EXPECT_EQ(listed, "admin/base alice/kept ");
  EXPECT_EQ(images.Find("alice", "kept")->digest(), Digest('f'));
  std::string digest;
  core->Read([&](const ClusterState& s) { digest = s.jobs().Find(job_id)->image_digest; });
  EXPECT_EQ(digest, Digest('f'));
  EXPECT_TRUE(images.DigestHeld(Digest('f')));
  EXPECT_FALSE(images.DigestHeld(Digest('d')));
}

TEST(CoreImagesTest, AHeartbeatsCachedImagesShowInTheNodesView) {
  FakeClock clock;
  auto core = CoordinatorCore::Create(StateOptions(), std::make_unique<FakeStore>(), &clock, Seconds(3600));
  ASSERT_TRUE(core.ok()) << core.status();
  NodeRecord n;
  n.name = "n1";
  n.host = "n1";
  n.inventory.gpus = 1;
  ASSERT_TRUE(RegisterAndWait(core->get(), n).ok());
  HeartbeatRequest req;
  req.node = "n1";
  req.cached_images = {Digest('a'), Digest('b')};
  ASSERT_TRUE(HeartbeatAndWait(core->get(), req).status.ok());
  std::vector<NodeView> nodes = CoreReads(core->get()).ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].cached_images, (std::vector<std::string>{Digest('a'), Digest('b')}));
  req.cached_images = {};
  ASSERT_TRUE(HeartbeatAndWait(core->get(), req).status.ok());
  EXPECT_TRUE(CoreReads(core->get()).ListNodes()[0].cached_images.empty());
}

}  // namespace
}  // namespace athanor::coord
