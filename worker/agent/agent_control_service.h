// AgentControl gRPC service: lets the coordinator read ranks' logs from this
// node's work dir. Stateless and thread-safe. Refuses job ids that are not
// safe file names (InvalidArgument); a missing log is NotFound.
#pragma once

#include <string>

#include "proto/athanor.grpc.pb.h"

namespace athanor::agent {

class AgentControlService final : public rpc::AgentControl::Service {
 public:
  explicit AgentControlService(std::string work_dir) : work_dir_(std::move(work_dir)) {}
  grpc::Status ReadLog(grpc::ServerContext*, const rpc::ReadLogRequest* req,
                       rpc::ReadLogResponse* resp) override;

 private:
  const std::string work_dir_;
};

}  // namespace athanor::agent
