// The CheckpointCommit gRPC service: node checkpoint services report durable
// shards here, and the coordinator commits complete steps (checkpoint_commit.h).
// A thin edge: it checks the report against the job (it exists, has a store,
// and the reporting node holds one of its ranks), then queues CompleteSteps on
// the committer's thread and answers when that is done. The store URI is the
// job's own, never the report's.
//
// Thread-safe; the core is not owned.
#pragma once

#include "coordinator/coordinator_core.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class CheckpointCommitService final : public rpc::CheckpointCommit::CallbackService {
 public:
  explicit CheckpointCommitService(CoordinatorCore* core) : core_(core) {}
  grpc::ServerUnaryReactor* ReportShardDurable(grpc::CallbackServerContext* ctx,
                                               const rpc::ShardDurableRequest* req,
                                               rpc::ShardDurableResponse* resp) override;

 private:
  CoordinatorCore* const core_;
};

}  // namespace athanor::coord
