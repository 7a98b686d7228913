// CoordinatorReporter: reports durable shards, hand-offs and failed uploads to the coordinator's
// CheckpointCommit service (proto/athanor.proto, "checkpoint service"), as
// the node named `node`. Retries a few times with backoff while the
// coordinator is unreachable (a restart); the coordinator's own poll commits
// complete steps whose reports were lost.
//
// Thread-safe (gRPC stubs are).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "checkpoint/service/checkpoint_service.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::ckptsvc {

class CoordinatorReporter final : public DurableReporter {
 public:
  // `credentials`: the node's agent certificate over mutual TLS (the
  // coordinator accepts reports only from a node holding a rank of the job),
  // or plaintext for an --insecure coordinator.
  CoordinatorReporter(const std::string& coordinator, std::string node,
                      std::shared_ptr<grpc::ChannelCredentials> credentials,
                      const grpc::ChannelArguments& args);
  absl::Status ShardDurable(const DurableShard& shard) override;
  // Hand-offs are told once, with a short deadline (the report races the
  // rank's exit; a late one only shortens the job's wait); failures retry
  // like durable shards.
  absl::Status ShardUpload(const ShardUploadEvent& event) override;

 private:
  const std::string node_;
  std::unique_ptr<rpc::CheckpointCommit::Stub> stub_;
};

}  // namespace athanor::ckptsvc
