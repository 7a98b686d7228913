// The CheckpointCommit gRPC service: node checkpoint services report durable
// shards here, and the coordinator commits complete steps (checkpoint_commit.h).
// A thin edge: it checks the report against the job (it exists, has a store,
// and the reported rank is placed on the reporting node in the job's current
// or last attempt, with the job's world size: the job's own binding, since
// the report's keep_last prunes the job's store), then queues CompleteSteps on
// the committer's thread and answers when that is done. The store URI is the
// job's own, never the report's.
//
// Authorised (auth_policy.h): only an agent certificate of a node that holds
// a rank of the job, naming its own node; then the binding above (an upload
// report of an earlier attempt is checked for the node only).
//
// Thread-safe; the core and the authorizer are not owned.
#pragma once

#include "coordinator/auth/auth_policy.h"
#include "coordinator/core/coordinator_core.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::coord {

class CheckpointCommitService final : public rpc::CheckpointCommit::CallbackService {
 public:
  // Both RPCs are authorised alike: only an agent certificate of a node that
  // holds a rank of the job, naming its own node.
  CheckpointCommitService(CoordinatorCore* core, const Authorizer* auth) : core_(core), auth_(auth) {}
  grpc::ServerUnaryReactor* ReportShardDurable(grpc::CallbackServerContext* ctx,
                                               const rpc::ShardDurableRequest* req,
                                               rpc::ShardDurableResponse* resp) override;
  // A shard handed off to, or failed by, the service: recorded so that a
  // requeued job waits for that step (ClusterCheckpoints::ReportShardUpload).
  grpc::ServerUnaryReactor* ReportShardUpload(grpc::CallbackServerContext* ctx,
                                              const rpc::ShardUploadRequest* req,
                                              rpc::ShardUploadResponse* resp) override;

 private:
  // The caller may report for `node` about `job` (which must exist).
  absl::Status Authorize(grpc::CallbackServerContext* ctx, absl::string_view method,
                         const absl::StatusOr<JobRecord>& job, const std::string& node) const;

  CoordinatorCore* const core_;
  const Authorizer* const auth_;
};

}  // namespace athanor::coord
