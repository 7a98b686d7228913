// StandbyServer and the channel a list of coordinators gets
// (common/coordinator_channel.h): a standby answers every call naming the
// leader, and a list's channel calls only the member whose health says it
// leads, following the lead when it moves.
#include "coordinator/rpc/standby_server.h"

#include <gtest/gtest.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "common/coordinator_channel.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {
namespace {

// A member that answers every call OK (an empty message), naming itself in
// the trailing metadata `served-by`; its health for kLeaderHealthService is
// set by the test.
class FakeMember : public grpc::CallbackGenericService {
 public:
  explicit FakeMember(std::string name) : name_(std::move(name)) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeMember() override {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  void Lead(bool leads) { server_->GetHealthCheckService()->SetServingStatus(kLeaderHealthService, leads); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool up() const { return server_ != nullptr && port_ != 0; }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor(grpc::GenericCallbackServerContext* ctx, const std::string& name) {
        ctx->AddTrailingMetadata("served-by", name);
        StartRead(&request_);
      }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status::OK);
        // An empty message: any response type's default.
        grpc::Slice empty("", 0);
        reply_ = grpc::ByteBuffer(&empty, 1);
        StartWrite(&reply_);
      }
      void OnWriteDone(bool) override { Finish(grpc::Status::OK); }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_, reply_;
    };
    return new Reactor(ctx, name_);
  }

 private:
  const std::string name_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  auto it = ctx.GetServerTrailingMetadata().find(key);
  return it == ctx.GetServerTrailingMetadata().end() ? "" : std::string(it->second.data(), it->second.size());
}

TEST(StandbyServerTest, AnswersEveryCallWithTheLeader) {
  int port = 0;
  absl::StatusOr<std::unique_ptr<StandbyServer>> standby =
      StandbyServer::Start("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ASSERT_TRUE(standby.ok()) << standby.status();
  ASSERT_GT(port, 0);
  auto stub = rpc::Coordinator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    rpc::ListJobsResponse resp;
    grpc::Status s = stub->ListJobs(&ctx, rpc::ListJobsRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(),
              "this coordinator is a standby and no leader is known yet; try again, or name every coordinator "
              "(--coordinator a,b,c)");
    EXPECT_EQ(Trailer(ctx, kLeaderMetadataKey), "");
  }
  (*standby)->SetLeader("c1.example:7700", 42);
  for (bool write : {false, true}) {
    grpc::ClientContext ctx;
    grpc::Status s;
    if (write) {
      rpc::SubmitJobRequest req;
      rpc::SubmitJobResponse resp;
      s = stub->SubmitJob(&ctx, req, &resp);
    } else {
      rpc::ListNodesResponse resp;
      s = stub->ListNodes(&ctx, rpc::ListNodesRequest(), &resp);
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(),
              "this coordinator is a standby; the leader is c1.example:7700 (term 42): call it, or name every "
              "coordinator (--coordinator a,b,c)");
    EXPECT_EQ(Trailer(ctx, kLeaderMetadataKey), "c1.example:7700");
  }
  // The port is free once it is gone: the leader's server takes it.
  standby->reset();
  int again = 0;
  absl::StatusOr<std::unique_ptr<StandbyServer>> next =
      StandbyServer::Start(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(), &again);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(again, port);
}

// A list's channel sends calls only to the member whose health reports
// SERVING for kLeaderHealthService, whatever the list's order, and moves when
// the lead does.
TEST(StandbyServerTest, AListsChannelCallsOnlyTheLeader) {
  int standby_port = 0;
  absl::StatusOr<std::unique_ptr<StandbyServer>> standby =
      StandbyServer::Start("127.0.0.1:0", grpc::InsecureServerCredentials(), &standby_port);
  ASSERT_TRUE(standby.ok()) << standby.status();
  FakeMember a("a"), b("b");
  ASSERT_TRUE(a.up() && b.up());
  a.Lead(true);
  b.Lead(false);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  absl::StatusOr<std::string> target =
      CoordinatorDialTarget(absl::StrCat("127.0.0.1:", standby_port, ",", b.address(), ",", a.address()), &args);
  ASSERT_TRUE(target.ok()) << target.status();
  auto stub = rpc::Coordinator::NewStub(grpc::CreateCustomChannel(*target, grpc::InsecureChannelCredentials(), args));
  // Who answers the next call that gets through, within a 10 s watchdog.
  auto served_by = [&]() -> std::string {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::ListNodesResponse resp;
    grpc::Status s = stub->ListNodes(&ctx, rpc::ListNodesRequest(), &resp);
    return s.ok() ? Trailer(ctx, "served-by") : absl::StrCat("error: ", s.error_message());
  };
  for (int i = 0; i < 20; ++i) EXPECT_EQ(served_by(), "a") << i;

  // The lead moves to b: a says so first, as a deposed leader's exit does.
  a.Lead(false);
  b.Lead(true);
  std::string who = served_by();
  while (who == "a") who = served_by();  // calls already routed to a, until its health change lands
  EXPECT_EQ(who, "b");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(served_by(), "b") << i;
}

}  // namespace
}  // namespace athanor::coord
