// The Images service and NodeData.FetchImage over gRPC (in process,
// --insecure: the caller's tenant is its x-athanor-user), on a fake data
// store and a fake state store: the header's checks before any byte, the
// digest and length checks, content written once per digest, an image's
// content served in 1 MiB pieces only while a job runs it, and removal
// refused while a job runs it, the content deleted with its last record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "checkpoint/fake_object_store.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/images/image_registry.h"
#include "coordinator/rpc/images_service.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/store/fake_store.h"
#include "storage/archive.h"

namespace athanor::coord {
namespace {

const int kWatchdog = (alarm(60), 0);

std::string DigestOf(const std::string& bytes) {
  storage::Sha256Hasher h;
  h.Update(bytes.data(), bytes.size());
  return h.Finish();
}

// 2.5 MiB that differ everywhere: three pieces on the way out.
std::string Content(char seed) {
  std::string s(5 << 19, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(seed + i * 7 + (i >> 12));
  return s;
}

class ImagesServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core_ = *CoordinatorCore::Create(StateOptions(), std::make_unique<FakeStore>(), &clock_, Seconds(3600));
    images_ = std::make_unique<ImagesService>(core_.get(), &auth_, &blobs_, /*max_bytes=*/8 << 20);
    node_data_ = std::make_unique<NodeDataService>(core_.get(), &auth_, &blobs_);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(images_.get());
    b.RegisterService(node_data_.get());
    server_ = b.BuildAndStart();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    stub_ = rpc::Images::NewStub(channel);
    data_stub_ = rpc::NodeData::NewStub(channel);
    ASSERT_TRUE(core_->Write([&](ClusterState& s) -> absl::Status {
      NodeRecord n;
      n.name = "n1";
      n.host = "n1";
      n.inventory.gpus = 2;
      return s.agents().Register(n, {});
    }).ok());
  }
  void TearDown() override { server_->Shutdown(); }

  // Streams `header` then `content` in pieces of `piece` bytes as `tenant`.
  grpc::Status Import(const std::string& tenant, const rpc::ImportImageHeader& header,
                      const std::string& content, rpc::Image* out, size_t piece = 1 << 20) {
    grpc::ClientContext c;
    c.AddMetadata("x-athanor-user", tenant);
    auto writer = stub_->ImportImage(&c, out);
    rpc::ImportImageChunk chunk;
    *chunk.mutable_header() = header;
    bool open = writer->Write(chunk);
    for (size_t at = 0; open && at < content.size(); at += piece) {
      rpc::ImportImageChunk data;
      data.set_data(content.substr(at, piece));
      open = writer->Write(data);
    }
    writer->WritesDone();
    return writer->Finish();
  }
  static rpc::ImportImageHeader Header(const std::string& name, const std::string& content) {
    rpc::ImportImageHeader h;
    h.set_name(name);
    h.set_size_bytes(static_cast<int64_t>(content.size()));
    h.set_digest(DigestOf(content));
    h.set_source("rootfs.tar");
    return h;
  }
  // Every piece FetchImage sends of `digest`, or its status.
  grpc::Status Fetch(const std::string& digest, std::vector<std::string>* pieces) {
    grpc::ClientContext c;
    rpc::FetchImageRequest req;
    req.set_digest(digest);
    auto reader = data_stub_->FetchImage(&c, req);
    rpc::DataChunk chunk;
    while (reader->Read(&chunk)) pieces->push_back(chunk.data());
    return reader->Finish();
  }
  std::string Submit(const std::string& tenant, const std::string& image) {
    JobSpec s;
    s.tenant = tenant;
    s.nodes = 1;
    s.gpus_per_node = 1;
    s.command = {"train"};
    s.image = image;
    absl::StatusOr<SubmitResult> r = SubmitAndWait(core_.get(), s);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job_id : "";
  }
  bool HasBlob(const std::string& digest) { return blobs_.Head(ImageBlobKey(digest)).ok(); }

  FakeClock clock_;
  FakeObjectStore blobs_;
  Authorizer auth_{nullptr, /*insecure=*/true};
  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<ImagesService> images_;
  std::unique_ptr<NodeDataService> node_data_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rpc::Images::Stub> stub_;
  std::unique_ptr<rpc::NodeData::Stub> data_stub_;
};

TEST_F(ImagesServiceTest, RefusesBadHeadersAndContentThatDoesNotMatch) {
  const std::string content = Content('a');
  rpc::Image out;
  rpc::ImportImageHeader big = Header("big", content);
  big.set_size_bytes((8 << 20) + 1);
  grpc::Status s = Import("alice", big, "", &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "size_bytes: 8388609 is over this coordinator's --image-max-bytes (8388608)");
  rpc::ImportImageHeader wrong = Header("wrong", content);
  wrong.set_digest(DigestOf("something else"));
  s = Import("alice", wrong, content, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "the content's sha256 is " + DigestOf(content) + ", not the header's " +
                                   DigestOf("something else"));
  s = Import("alice", Header("short", content), content.substr(0, 1000), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "the stream ended after 1000 of 2621440 bytes");
  s = Import("alice", Header("pieces", content), content, &out, (1 << 20) + 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "a piece of 1048577 bytes (at most 1048576)");
  rpc::ImportImageHeader pub = Header("pub", content);
  pub.set_public_(true);
  s = Import("", pub, content, &out);  // no tenant at all
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "tenant: required (the caller has no tenant of its own)");
  s = Import("alice", Header("a/b", content), content, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(HasBlob(DigestOf(content)));
  rpc::ListImagesResponse list;
  grpc::ClientContext c;
  ASSERT_TRUE(stub_->ListImages(&c, rpc::ListImagesRequest(), &list).ok());
  EXPECT_EQ(list.images_size(), 0);
}

TEST_F(ImagesServiceTest, ServesAnImageToNodesOnlyWhileAJobRunsItAndRemovesItAfter) {
  const std::string content = Content('b');
  const std::string digest = DigestOf(content);
  rpc::Image image;
  grpc::Status s = Import("alice", Header("base", content), content, &image);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(image.tenant(), "alice");
  EXPECT_EQ(image.name(), "base");
  EXPECT_EQ(image.digest(), digest);
  EXPECT_EQ(image.size_bytes(), 2621440);
  EXPECT_EQ(image.source(), "rootfs.tar");
  EXPECT_EQ(*blobs_.Get(ImageBlobKey(digest), 0, -1), content);
  // The same content under a second name: one blob.
  ASSERT_TRUE(Import("alice", Header("copy", content), content, &image).ok());
  s = Import("alice", Header("base", content), content, &image);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);

  std::vector<std::string> pieces;
  s = Fetch(digest, &pieces);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  const std::string job = Submit("alice", "base");
  pieces.clear();
  s = Fetch(digest, &pieces);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].size(), 1u << 20);
  EXPECT_EQ(pieces[2].size(), 1u << 19);
  EXPECT_EQ(pieces[0] + pieces[1] + pieces[2], content);

  grpc::ClientContext rm1;
  rm1.AddMetadata("x-athanor-user", "alice");
  rpc::RemoveImageRequest req;
  req.set_name("base");
  rpc::Image removed;
  s = stub_->RemoveImage(&rm1, req, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(),
            "image 'base' of tenant alice is in use by job(s) " + job + " (cancel them or wait until they end)");
  ASSERT_TRUE(core_->Write([&](ClusterState& st) { return st.CancelJob(job).status(); }).ok());
  // The job was placed: it ends once its ranks are gone (none ever ran here).
  ASSERT_TRUE(core_->Write([&](ClusterState& st) -> absl::Status {
    std::vector<RankReport> exited;
    for (const DesiredRank& d : ClusterAgents::DesiredFor(st, "n1")) {
      RankReport r;
      r.job_id = d.job_id;
      r.attempt = d.attempt;
      r.rank = d.rank;
      r.phase = RankPhase::kExited;
      r.signal = 15;
      r.signal_from_agent = true;
      exited.push_back(r);
    }
    st.agents().Heartbeat("n1", st.log().generation(), exited);
    return absl::OkStatus();
  }).ok());
  grpc::ClientContext rm2;
  rm2.AddMetadata("x-athanor-user", "alice");
  s = stub_->RemoveImage(&rm2, req, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(HasBlob(digest));  // "copy" holds it
  pieces.clear();
  EXPECT_EQ(Fetch(digest, &pieces).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext rm3;
  rm3.AddMetadata("x-athanor-user", "alice");
  req.set_name("copy");
  ASSERT_TRUE(stub_->RemoveImage(&rm3, req, &removed).ok());
  EXPECT_FALSE(HasBlob(digest));
}

TEST_F(ImagesServiceTest, UsersListTheirOwnAndPublicImages) {
  const std::string content = Content('c');
  rpc::Image out;
  ASSERT_TRUE(Import("alice", Header("mine", content), content, &out).ok());
  rpc::ImportImageHeader pub = Header("shared", content);
  pub.set_public_(true);
  // --insecure: every caller may publish (there are no roles to check).
  ASSERT_TRUE(Import("ops", pub, content, &out).ok());
  ASSERT_TRUE(Import("bob", Header("his", content), content, &out).ok());
  grpc::ClientContext c;
  rpc::ListImagesRequest req;
  req.set_tenant("alice");
  rpc::ListImagesResponse list;
  ASSERT_TRUE(stub_->ListImages(&c, req, &list).ok());
  ASSERT_EQ(list.images_size(), 1);
  EXPECT_EQ(list.images(0).name(), "mine");
  grpc::ClientContext all;
  list.Clear();
  ASSERT_TRUE(stub_->ListImages(&all, rpc::ListImagesRequest(), &list).ok());
  EXPECT_EQ(list.images_size(), 3);
}

}  // namespace
}  // namespace athanor::coord
