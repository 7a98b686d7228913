#include "checkpoint/service/checkpoint_service.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "absl/synchronization/notification.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/fake_object_store.h"
#include "checkpoint/forwarding_object_store.h"
#include "checkpoint/file/file_object_store.h"
#include "checkpoint/layout.h"
#include "checkpoint/service/service_checkpointer.h"
#include "checkpoint/service/wire.h"
#include "checkpoint/shard_upload.h"

namespace athanor::ckptsvc {
namespace {

using testing_util::FillRankState;
using testing_util::RankState;
using testing_util::RunRanks;

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/ckptsvc-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "";
}

class RecordingReporter final : public DurableReporter {
 public:
  absl::Status ShardDurable(const DurableShard& shard) override {
    absl::MutexLock lock(&mu_);
    shards_.push_back(shard);
    return absl::OkStatus();
  }
  absl::Status ShardUpload(const ShardUploadEvent& event) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(event);
    return absl::OkStatus();
  }
  std::vector<DurableShard> shards() {
    absl::MutexLock lock(&mu_);
    return shards_;
  }
  std::vector<ShardUploadEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<DurableShard> shards_ ABSL_GUARDED_BY(mu_);
  std::vector<ShardUploadEvent> events_ ABSL_GUARDED_BY(mu_);
};

// Delegates to a file store; OpenWrite blocks until the gate opens.
class GatedStore final : public ForwardingObjectStore {
 public:
  GatedStore(std::unique_ptr<ObjectStore> inner, absl::Notification* gate)
      : ForwardingObjectStore(std::move(inner)), gate_(gate) {}
  absl::StatusOr<std::unique_ptr<WritableObject>> OpenWrite(const std::string& key,
                                                            PutMode mode) override {
    gate_->WaitForNotification();
    return inner()->OpenWrite(key, mode);
  }

 private:
  absl::Notification* gate_;
};

class ServiceTest : public ::testing::Test {
 protected:
  void StartService(uint64_t budget = 1 << 20, absl::Notification* gate = nullptr) {
    dir_ = MakeTempDir();
    root_ = dir_ + "/store";
    CheckpointServiceOptions o;
    o.socket_path = dir_ + "/svc.sock";
    o.staging_dir = dir_ + "/staging";
    o.registry_dir = dir_ + "/registry";
    o.budget_bytes = budget;
    o.stats_path = dir_ + "/stats.json";
    std::string root = root_;
    auto svc = CheckpointService::Start(
        o, &reporter_,
        [root, gate](const std::string& uri, const std::map<std::string, std::string>& env)
            -> absl::StatusOr<std::unique_ptr<ObjectStore>> {
          EXPECT_EQ(uri, "file://" + root);
          EXPECT_EQ(env.at("AWS_ACCESS_KEY_ID"), "job-key");
          auto store = FileObjectStore::Open(root);
          if (!store.ok()) return store.status();
          if (gate == nullptr) return std::unique_ptr<ObjectStore>(std::move(*store));
          return std::unique_ptr<ObjectStore>(new GatedStore(std::move(*store), gate));
        });
    ASSERT_TRUE(svc.ok()) << svc.status();
    service_ = std::move(*svc);
    auto registry = RankRegistry::Open(o.registry_dir);  // what the agent writes
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = std::move(*registry);
  }
  ServiceCheckpointerOptions ClientOptions(int rank, int world,
                                           InFlightPolicy policy = InFlightPolicy::kWait) {
    ServiceCheckpointerOptions o;
    o.socket_path = dir_ + "/svc.sock";
    o.job = "job";
    o.attempt = 2;
    o.rank = rank;
    o.world_size = world;
    o.in_flight = policy;
    o.uri = "file://" + root_;
    o.env = {{"AWS_ACCESS_KEY_ID", "job-key"}};
    // The agent registers every rank it starts.
    EXPECT_TRUE(registry_->Register({o.job, o.attempt, rank, geteuid(), o.uri, 0}).ok());
    return o;
  }
  std::unique_ptr<ServiceCheckpointer> Connect(const ServiceCheckpointerOptions& o) {
    auto c = ServiceCheckpointer::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string dir_, root_;
  RecordingReporter reporter_;
  std::unique_ptr<CheckpointService> service_;
  std::unique_ptr<RankRegistry> registry_;
};

// Only ranks the agent registered may stage, as registered: the uid, the
// checkpoint root and (where the agent fixed one) keep_last must agree.
TEST_F(ServiceTest, AStageMustAgreeWithTheAgentsRegistration) {
  StartService();
  auto Refused = [](const std::string& why) {
    return absl::FailedPreconditionError("checkpoint service refused staging step 1: PERMISSION_DENIED: " + why);
  };
  RankState s;
  FillRankState(&s, 1, 0, 1);
  ServiceCheckpointerOptions o = ClientOptions(0, 1);
  ASSERT_TRUE(registry_->Unregister("job", 2, 0).ok());
  auto unregistered = Connect(o);
  ASSERT_NE(unregistered, nullptr);
  EXPECT_EQ(unregistered->Save(1, s.state).status(),
            Refused("job job attempt 2 rank 0 is not registered with this node's checkpoint "
                                        "service: only ranks this node's agent started may stage, and only as "
                                        "themselves"));
  ASSERT_TRUE(registry_->Register({"job", 2, 0, geteuid() + 1, o.uri, 0}).ok());
  auto other_uid = Connect(o);
  EXPECT_EQ(other_uid->Save(1, s.state).status(),
            Refused(absl::StrCat("job job attempt 2 rank 0 runs as uid ", geteuid() + 1,
                                                     " on this node; uid ", geteuid(), " may not stage for it")));
  ASSERT_TRUE(registry_->Register({"job", 2, 0, geteuid(), "file:///elsewhere", 0}).ok());
  auto other_root = Connect(o);
  EXPECT_EQ(other_root->Save(1, s.state).status(),
            Refused(absl::StrCat("job job attempt 2 rank 0: the stage names checkpoint root '",
                                                     o.uri, "', not the job's ('file:///elsewhere')")));
  ASSERT_TRUE(registry_->Register({"job", 2, 0, geteuid(), o.uri, 5}).ok());
  auto other_keep = Connect(o);
  EXPECT_EQ(other_keep->Save(1, s.state).status(),
            Refused("job job attempt 2 rank 0: the stage asks for keep_last 3, not the job's 5"));
  auto agreeing = Connect(ClientOptions(0, 1));  // registers it as it is
  EXPECT_EQ(agreeing->Save(1, s.state).value_or(false), true);
  EXPECT_TRUE(agreeing->Wait().ok());
  service_->WaitIdle();
  EXPECT_EQ(reporter_.shards().size(), 1u);
}

TEST_F(ServiceTest, ThreeRanksThroughTheServiceWriteWhatTheInRankPathWrites) {
  StartService();
  RunRanks(3, [&](int rank) {
    RankState s;
    FillRankState(&s, 10, rank, 3);
    auto client = Connect(ClientOptions(rank, 3));
    ASSERT_NE(client, nullptr);
    absl::StatusOr<bool> saved = client->Save(10, s.state);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_TRUE(*saved);
    EXPECT_TRUE(client->Wait().ok());  // the service accepted the hand-off
  });
  service_->WaitIdle();
  std::vector<DurableShard> shards = reporter_.shards();
  ASSERT_EQ(shards.size(), 3u);
  auto store = FileObjectStore::Open(root_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(WriteCommit(store->get(), "job", 10, 3, 1'700'000'000).ok());

  // The same three ranks through the in-rank Checkpointer.
  FakeObjectStore reference;
  InProcessCommitBarrier barrier(3);
  FakeClock clock;
  RunRanks(3, [&](int rank) {
    RankState s;
    FillRankState(&s, 10, rank, 3);
    CheckpointerOptions o;
    o.job = "job";
    o.rank = rank;
    o.world_size = 3;
    o.clock = &clock;
    Checkpointer ckpt(&reference, &barrier, o);
    ASSERT_TRUE(ckpt.Save(10, s.state).ok());
    EXPECT_TRUE(ckpt.Wait().ok());
  });
  auto listed = (*store)->List("job/");
  ASSERT_TRUE(listed.ok());
  std::map<std::string, std::string> expected = reference.Objects();
  ASSERT_EQ(listed->size(), expected.size());
  for (const ObjectInfo& info : *listed) {
    auto got = (*store)->Get(info.key, 0, -1);
    ASSERT_TRUE(got.ok()) << info.key;
    EXPECT_EQ(*got, expected[info.key]) << info.key;
  }
  for (const DurableShard& d : shards) {
    auto m = DecodeManifest(expected[ckpt_layout::ManifestKey("job", 10, d.rank)]);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(d.job, "job");
    EXPECT_EQ(d.attempt, 2);
    EXPECT_EQ(d.world_size, 3);
    EXPECT_EQ(d.shard_key, m->shard_key);
    EXPECT_EQ(d.shard_size, m->shard_size);
    EXPECT_EQ(d.shard_crc32c, m->shard_crc32c);
    EXPECT_EQ(d.manifest_crc32c, ManifestCrc(*m));
  }
  EXPECT_EQ(service_->staged_bytes(), 0u);  // every rank has gone
  // The totals the agent exports, in memory and in the stats file.
  uint64_t bytes = 0;
  for (const DurableShard& d : shards) bytes += d.shard_size;
  const UploadTotals totals = service_->upload_totals();
  EXPECT_EQ(totals.uploaded, 3u);
  EXPECT_EQ(totals.failed, 0u);
  EXPECT_EQ(totals.bytes, bytes);
  EXPECT_GT(totals.seconds, 0);
  std::ifstream stats_file(dir_ + "/stats.json");
  nlohmann::json stats = nlohmann::json::parse(stats_file, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(stats.is_object());
  EXPECT_EQ(stats["uploaded"], 3);
  EXPECT_EQ(stats["failed"], 0);
  EXPECT_EQ(stats["bytes"], bytes);
  EXPECT_EQ(stats["pid"], getpid());
}

TEST_F(ServiceTest, TheUploadOutlivesTheRankAndSkipsWhileItRuns) {
  absl::Notification gate;
  StartService(1 << 20, &gate);
  RankState s;
  FillRankState(&s, 4, 0, 1);
  auto client = Connect(ClientOptions(0, 1, InFlightPolicy::kSkip));
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->Save(4, s.state).value_or(false), true);  // handed off, upload blocked
  EXPECT_TRUE(client->in_flight());
  EXPECT_EQ(client->Save(5, s.state).value_or(true), false);  // skipped: still uploading
  const uint64_t shard = client->stats().shard_bytes;
  EXPECT_EQ(service_->staged_bytes(), shard);
  client.reset();  // the rank exits
  EXPECT_TRUE(reporter_.shards().empty());
  gate.Notify();
  service_->WaitIdle();
  ASSERT_EQ(reporter_.shards().size(), 1u);
  EXPECT_EQ(reporter_.shards()[0].step, 4);
  EXPECT_EQ(reporter_.shards()[0].shard_size, shard);
  // The hand-off was told (before the upload began), and no failure.
  ASSERT_EQ(reporter_.events().size(), 1u);
  const ShardUploadEvent handed = reporter_.events()[0];
  EXPECT_EQ(handed.job, "job");
  EXPECT_EQ(handed.attempt, 2);
  EXPECT_EQ(handed.step, 4);
  EXPECT_EQ(handed.rank, 0);
  EXPECT_EQ(handed.world_size, 1);
  EXPECT_FALSE(handed.failed);
  auto store = FileObjectStore::Open(root_);
  EXPECT_TRUE((*store)->Head(ckpt_layout::ManifestKey("job", 4, 0)).ok());
  EXPECT_EQ(service_->staged_bytes(), 0u);
}

TEST_F(ServiceTest, AFullBudgetSkipsUnderSkipPolicy) {
  absl::Notification gate;
  RankState s0, s1;
  FillRankState(&s0, 4, 0, 2);
  FillRankState(&s1, 4, 1, 2);
  uint64_t one = PlanShard(s0.state, 4, 0, 2)->total_size;
  StartService(one + one / 2, &gate);  // room for one shard
  auto r0 = Connect(ClientOptions(0, 2, InFlightPolicy::kSkip));
  auto r1 = Connect(ClientOptions(1, 2, InFlightPolicy::kSkip));
  EXPECT_EQ(r0->Save(4, s0.state).value_or(false), true);
  EXPECT_TRUE(r0->Wait().ok());
  EXPECT_EQ(r1->Save(4, s1.state).value_or(true), false);
  gate.Notify();
  service_->WaitIdle();
  EXPECT_EQ(reporter_.shards().size(), 1u);
}

TEST_F(ServiceTest, BadRequestsGetClearErrorsAndTheServiceKeepsServing) {
  StartService(4096);
  auto sock = ConnectService(dir_ + "/svc.sock");
  ASSERT_TRUE(sock.ok());
  auto ask = [&](const nlohmann::json& msg) {
    EXPECT_TRUE(SendFrame(*sock, msg).ok());
    auto reply = RecvFrame(*sock);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->msg.value("error", std::string()) : std::string();
  };
  EXPECT_NE(ask({{"op", "handoff"}, {"manifest", "{"}}).find("DATA_LOSS"), std::string::npos);
  nlohmann::json stage = {{"op", "stage"}, {"job", "job"}, {"attempt", 0}, {"rank", 0},
                          {"world_size", 1}, {"step", 1}, {"bytes", 5000}, {"uri", "file:///x"},
                          {"keep_last", 3}};
  EXPECT_EQ(ask(stage), "RESOURCE_EXHAUSTED: a 5000-byte shard can never fit the node's "
                        "4096-byte staging budget");
  stage["rank"] = 1;
  EXPECT_EQ(ask(stage), "INVALID_ARGUMENT: field 'rank' = 1 is outside [0, 0]");
  stage["rank"] = 0;
  stage["job"] = "../etc";
  EXPECT_EQ(ask(stage), "INVALID_ARGUMENT: invalid job id '../etc'");
  stage["job"] = "job";
  stage["bytes"] = 100;
  stage["env"] = {{"HOME", "/root"}};
  EXPECT_EQ(ask(stage), "INVALID_ARGUMENT: field 'env' may hold only AWS_* strings; 'HOME' is not one");
  // A frame announcing 4 GiB: the connection is dropped, the service lives on.
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
  ASSERT_EQ(::send(*sock, huge, 4, MSG_NOSIGNAL), 4);
  char byte;
  EXPECT_EQ(::recv(*sock, &byte, 1, 0), 0);
  ::close(*sock);
  RankState s;
  FillRankState(&s, 1, 0, 1);
  auto client = Connect(ClientOptions(0, 1));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->Save(1, s.state).value_or(false), true);
  EXPECT_TRUE(client->Wait().ok());
}

TEST_F(ServiceTest, ARestartDiscardsAreasLeftByTheEarlierRun) {
  dir_ = MakeTempDir();
  ASSERT_EQ(::mkdir((dir_ + "/staging").c_str(), 0700), 0);
  std::ofstream(dir_ + "/staging/job.0.1.area") << "partial shard";
  std::ofstream(dir_ + "/staging/job.0.1.area.handoff") << "job job step 7 rank 0 of 2 attempt 3";
  std::string saved = dir_;
  StartService();  // a fresh dir_ for the store; reuse the old staging dir below
  CheckpointServiceOptions o;
  o.socket_path = saved + "/svc.sock";
  o.staging_dir = saved + "/staging";
  o.registry_dir = saved + "/registry";
  auto svc = CheckpointService::Start(o, &reporter_, nullptr);
  ASSERT_TRUE(svc.ok()) << svc.status();
  EXPECT_NE(::access((saved + "/staging/job.0.1.area").c_str(), F_OK), 0);
  EXPECT_NE(::access((saved + "/staging/job.0.1.area.handoff").c_str(), F_OK), 0);
  // ... and told the coordinator that step will not commit.
  ASSERT_EQ(reporter_.events().size(), 1u);
  const ShardUploadEvent failed = reporter_.events()[0];
  EXPECT_EQ(failed.job, "job");
  EXPECT_EQ(failed.step, 7);
  EXPECT_EQ(failed.rank, 0);
  EXPECT_EQ(failed.world_size, 2);
  EXPECT_EQ(failed.attempt, 3);
  EXPECT_TRUE(failed.failed);
  EXPECT_EQ(failed.error, "the checkpoint service restarted before the upload finished");
}

}  // namespace
}  // namespace athanor::ckptsvc
