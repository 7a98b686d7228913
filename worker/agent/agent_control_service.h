// AgentControl gRPC service: lets the coordinator read ranks' logs from this
// node's work dir. Stateless and thread-safe. Refuses job ids that are not
// safe file names (InvalidArgument); a missing log is NotFound. With
// `coordinator_only` (mutual TLS), only a peer presenting the coordinator's
// certificate is answered (PermissionDenied otherwise).
#pragma once

#include <string>

#include "proto/athanor.grpc.pb.h"

namespace athanor::agent {

class AgentControlService final : public rpc::AgentControl::Service {
 public:
  AgentControlService(std::string work_dir, bool coordinator_only)
      : work_dir_(std::move(work_dir)), coordinator_only_(coordinator_only) {}
  grpc::Status ReadLog(grpc::ServerContext* ctx, const rpc::ReadLogRequest* req,
                       rpc::ReadLogResponse* resp) override;

 private:
  const std::string work_dir_;
  const bool coordinator_only_;
};

}  // namespace athanor::agent
