#include "coordinator/rpc/standby_server.h"

#include <chrono>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "common/coordinator_targets.h"

namespace athanor::coord {

// Any method: answered with Answer() before a message is read.
class StandbyServer::Redirect : public grpc::CallbackGenericService {
 public:
  explicit Redirect(const StandbyServer* owner) : owner_(owner) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor(grpc::GenericCallbackServerContext* ctx, const StandbyServer* owner) {
        std::string leader;
        grpc::Status status = owner->Answer(&leader);
        if (!leader.empty()) ctx->AddTrailingMetadata(kLeaderMetadataKey, leader);
        Finish(status);
      }
      void OnDone() override { delete this; }
    };
    return new Reactor(ctx, owner_);
  }

 private:
  const StandbyServer* const owner_;
};

StandbyServer::StandbyServer() : service_(std::make_unique<Redirect>(this)) {}

absl::StatusOr<std::unique_ptr<StandbyServer>> StandbyServer::Start(
    const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<StandbyServer> s(new StandbyServer());
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(listen, std::move(credentials), &bound);
  builder.RegisterCallbackGenericService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || bound == 0) return absl::UnavailableError(absl::StrCat("standby: cannot listen on ", listen));
  s->server_->GetHealthCheckService()->SetServingStatus(kLeaderHealthService, false);
  if (port != nullptr) *port = bound;
  return s;
}

StandbyServer::~StandbyServer() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

void StandbyServer::SetLeader(const std::string& address, int64_t term) {
  absl::MutexLock lock(&mu_);
  leader_ = address;
  term_ = term;
}

grpc::Status StandbyServer::Answer(std::string* leader) const {
  absl::MutexLock lock(&mu_);
  *leader = leader_;
  if (leader_.empty()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this coordinator is a standby and no leader is known yet; try again, or name every "
                        "coordinator (--coordinator a,b,c)");
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      absl::StrCat("this coordinator is a standby; the leader is ", leader_, " (term ", term_,
                                   "): call it, or name every coordinator (--coordinator a,b,c)"));
}

}  // namespace athanor::coord
