// The Volumes service and NodeData's volume calls over gRPC (in process,
// --insecure: the caller's tenant is its x-athanor-user), on a fake data
// store and a fake state store: create and quotas, the generation check,
// the size limit before any byte, the digest, and a coordinator that dies
// between a new generation's blob and its record's commit, which keeps the
// last committed generation.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "checkpoint/fake_object_store.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/rpc/volumes_service.h"
#include "coordinator/store/fake_store.h"
#include "storage/archive.h"

namespace athanor::coord {
namespace {

std::string DigestOf(const std::string& bytes) {
  storage::Sha256Hasher h;
  h.Update(bytes.data(), bytes.size());
  return h.Finish();
}

// One coordinator: the core over a FakeStore's data, both services served.
struct Coordinator {
  Coordinator(std::shared_ptr<FakeStore::Data> data, ObjectStore* blobs, const Clock* clock)
      : auth(nullptr, /*insecure=*/true) {
    core = *CoordinatorCore::Create(StateOptions(), std::make_unique<FakeStore>(std::move(data)), clock,
                                    Seconds(3600));
    volumes = std::make_unique<VolumesService>(core.get(), &auth, nullptr, blobs, VolumeQuota{1000, 2});
    node_data = std::make_unique<NodeDataService>(core.get(), &auth, blobs);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(volumes.get());
    b.RegisterService(node_data.get());
    server = b.BuildAndStart();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    volumes_stub = rpc::Volumes::NewStub(channel);
    data_stub = rpc::NodeData::NewStub(channel);
  }
  ~Coordinator() { server->Shutdown(); }

  Authorizer auth;
  std::unique_ptr<CoordinatorCore> core;
  std::unique_ptr<VolumesService> volumes;
  std::unique_ptr<NodeDataService> node_data;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<rpc::Volumes::Stub> volumes_stub;
  std::unique_ptr<rpc::NodeData::Stub> data_stub;
};

class VolumesServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coord_ = std::make_unique<Coordinator>(data_, &blobs_, &clock_);
    ASSERT_TRUE(coord_->core->Write([&](ClusterState& s) -> absl::Status {
      NodeRecord n;
      n.name = "n1";
      n.host = "n1";
      n.inventory.gpus = 2;
      return s.agents().Register(n, {});
    }).ok());
  }
  void As(grpc::ClientContext* c, const std::string& tenant) { c->AddMetadata("x-athanor-user", tenant); }
  grpc::Status Create(const std::string& tenant, const std::string& name, int64_t size, rpc::Volume* out) {
    grpc::ClientContext c;
    As(&c, tenant);
    rpc::CreateVolumeRequest req;
    req.set_name(name);
    req.set_size_limit_bytes(size);
    return coord_->volumes_stub->CreateVolume(&c, req, out);
  }
  std::string SubmitWriter(const std::string& tenant, const std::string& volume) {
    std::string id;
    EXPECT_TRUE(coord_->core->Write([&](ClusterState& s) -> absl::Status {
      JobSpec spec;
      spec.tenant = tenant;
      spec.command = {"train"};
      spec.volumes = {{volume, "/data", false}};
      absl::StatusOr<SubmitResult> r = s.SubmitJob(spec);
      if (r.ok()) id = r->job_id;
      return r.status();
    }).ok());
    return id;
  }
  grpc::Status Store(const std::string& job, const std::string& volume, int64_t base, const std::string& bytes,
                     int64_t claimed_size, const std::string& digest, rpc::StoreVolumeResponse* resp) {
    grpc::ClientContext c;
    auto writer = coord_->data_stub->StoreVolume(&c, resp);
    rpc::StoreVolumeChunk head;
    head.mutable_header()->set_job_id(job);
    head.mutable_header()->set_attempt(1);
    head.mutable_header()->set_volume(volume);
    head.mutable_header()->set_base_generation(base);
    head.mutable_header()->set_size_bytes(claimed_size);
    head.mutable_header()->set_digest(digest);
    if (writer->Write(head)) {
      rpc::StoreVolumeChunk piece;
      piece.set_data(bytes);
      writer->Write(piece);
      writer->WritesDone();
    }
    return writer->Finish();
  }
  // The header and the bytes FetchVolume sends.
  grpc::Status Fetch(const std::string& job, const std::string& volume, rpc::VolumeContentHeader* header,
                     std::string* bytes) {
    grpc::ClientContext c;
    rpc::FetchVolumeRequest req;
    req.set_job_id(job);
    req.set_attempt(1);
    req.set_volume(volume);
    auto reader = coord_->data_stub->FetchVolume(&c, req);
    rpc::VolumeContentChunk chunk;
    bytes->clear();
    while (reader->Read(&chunk)) {
      if (chunk.has_header()) *header = chunk.header();
      *bytes += chunk.data();
    }
    return reader->Finish();
  }

  FakeClock clock_;
  std::shared_ptr<FakeStore::Data> data_ = std::make_shared<FakeStore::Data>();
  FakeObjectStore blobs_;
  std::unique_ptr<Coordinator> coord_;
};

TEST_F(VolumesServiceTest, CreateListAndQuota) {
  rpc::Volume v;
  ASSERT_TRUE(Create("a", "data", 600, &v).ok());
  EXPECT_EQ(v.tenant(), "a");
  grpc::Status s = Create("a", "more", 500, &v);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "volume 'more' (500 bytes) would bring tenant a's volumes to 1100 bytes; its quota "
                               "is 1000 bytes");
  s = Create("a", "none", 0, &v);
  EXPECT_EQ(s.error_message(), "size_limit_bytes: required, above 0 (--size)");
  grpc::ClientContext c;
  As(&c, "a");
  rpc::ListVolumesRequest req;
  req.set_tenant("a");
  rpc::ListVolumesResponse list;
  ASSERT_TRUE(coord_->volumes_stub->ListVolumes(&c, req, &list).ok());
  ASSERT_EQ(list.volumes_size(), 1);
  EXPECT_EQ(list.volumes(0).name(), "data");
}

TEST_F(VolumesServiceTest, StoreChecksGenerationSizeAndDigestAndFetchReturnsIt) {
  rpc::Volume v;
  ASSERT_TRUE(Create("a", "data", 100, &v).ok());
  const std::string job = SubmitWriter("a", "data");
  rpc::VolumeContentHeader header;
  std::string bytes;
  ASSERT_TRUE(Fetch(job, "data", &header, &bytes).ok());
  EXPECT_EQ(header.generation(), 0);
  EXPECT_EQ(bytes, "");

  const std::string one = "generation one";
  rpc::StoreVolumeResponse resp;
  grpc::Status s = Store(job, "data", 0, one, 101, DigestOf(one), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "volume a/data: 101 bytes pass its size limit of 100 bytes");
  s = Store(job, "data", 0, one, one.size(), DigestOf("other"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "StoreVolume: the bytes hash to " + DigestOf(one) + ", not " + DigestOf("other"));
  s = Store(job, "data", 0, one, one.size(), DigestOf(one), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Refused and failed uploads left nothing behind; the committed one is there.
  EXPECT_EQ(blobs_.Objects().size(), 1u);
  EXPECT_EQ(resp.volume().generation(), 3);  // 1 and 2 went to the refused uploads
  EXPECT_EQ(resp.volume().used_bytes(), static_cast<int64_t>(one.size()));
  ASSERT_TRUE(Fetch(job, "data", &header, &bytes).ok());
  EXPECT_EQ(header.generation(), 3);
  EXPECT_EQ(header.digest(), DigestOf(one));
  EXPECT_EQ(bytes, one);

  s = Store(job, "data", 0, one, one.size(), DigestOf(one), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(s.error_message(), "volume 'data' is at generation 3, not 0: another job stored it since");

  const std::string two = "generation two";
  ASSERT_TRUE(Store(job, "data", 3, two, two.size(), DigestOf(two), &resp).ok());
  EXPECT_EQ(blobs_.Objects().size(), 1u);  // the previous blob is deleted
  EXPECT_EQ(blobs_.Objects().count(VolumeBlobKey("a", "data", resp.volume().generation())), 1u);
  const int64_t stored = resp.volume().generation();

  // No content (an unchanged copy's report): nothing stored, no generation
  // taken, no digest asked for; still only for the job's own mount.
  rpc::StoreVolumeResponse none;
  s = Store(job, "data", stored, "", 0, "", &none);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(blobs_.Objects().size(), 1u);
  ASSERT_TRUE(Fetch(job, "data", &header, &bytes).ok());
  EXPECT_EQ(header.generation(), stored);
  EXPECT_EQ(Store(job, "else", stored, "", 0, "", &none).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Another tenant's job, even with a volume of the same name, stores nothing here.
  ASSERT_TRUE(Create("b", "data", 100, &v).ok());
  const std::string other = SubmitWriter("b", "data");
  ASSERT_TRUE(Fetch(other, "data", &header, &bytes).ok());
  EXPECT_EQ(header.generation(), 0);  // b's own, empty
}

TEST_F(VolumesServiceTest, DeathBetweenBlobAndCommitKeepsTheLastGeneration) {
  rpc::Volume v;
  ASSERT_TRUE(Create("a", "data", 100, &v).ok());
  const std::string job = SubmitWriter("a", "data");
  const std::string one = "committed";
  rpc::StoreVolumeResponse resp;
  ASSERT_TRUE(Store(job, "data", 0, one, one.size(), DigestOf(one), &resp).ok());
  const int64_t committed = resp.volume().generation();
  {
    absl::MutexLock lock(&data_->mu);
    data_->fail_commits = true;  // the state database stops taking writes: as good as dead
  }
  const std::string two = "never committed";
  grpc::Status s = Store(job, "data", committed, two, two.size(), DigestOf(two), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(blobs_.Objects().size(), 2u);  // the new blob was written first
  // A new coordinator over what was durable.
  coord_.reset();
  {
    absl::MutexLock lock(&data_->mu);
    data_->fail_commits = false;
  }
  coord_ = std::make_unique<Coordinator>(data_, &blobs_, &clock_);
  rpc::VolumeContentHeader header;
  std::string bytes;
  grpc::Status f = Fetch(job, "data", &header, &bytes);
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(header.generation(), committed);
  EXPECT_EQ(bytes, one);
  // The start-up sweep deletes the blob no record names.
  absl::StatusOr<int> swept = SweepVolumeBlobs(&blobs_, CoreVolumes(coord_->core.get()).List(""));
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 1);
  ASSERT_EQ(blobs_.Objects().size(), 1u);
  EXPECT_EQ(blobs_.Objects().begin()->first, VolumeBlobKey("a", "data", committed));
}

}  // namespace
}  // namespace athanor::coord
