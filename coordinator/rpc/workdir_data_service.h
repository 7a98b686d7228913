// The WorkdirData gRPC service (proto/athanor_interactive.proto): agents
// store a reclaimed instance's rank work folders into the coordinator's data
// store, and fetch them back for a restoring instance's ranks
// (docs/operations.md, "Snapshots"). The coordinator checks each call
// against its own records (core/cluster_snapshots.h):
//   - StoreWorkdir: the asking node ran that rank of the job's newest
//     attempt, and the key is the one handed to it (RankSpec.snapshot_key);
//     at most --snapshot-max-bytes, sha256 checked; the blob is written
//     first, the record updated second.
//   - FetchWorkdir: the asking node runs that rank of a queued or running
//     job, and the key is its RankSpec.restore_key.
// Node role only (auth_policy.cc); with --insecure there is no node identity.
// Each call also deletes the blobs that dropped snapshots left
// (ClusterSnapshots::TakeOrphans).
//
// Synchronous API (a stream holds one of the server's threads for its
// length). Thread-safe. The core, the authorizer and the data store are not
// owned and outlive it.
#pragma once

#include <cstdint>

#include "checkpoint/object_store.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/core/coordinator_core.h"
#include "proto/athanor_interactive.grpc.pb.h"

namespace athanor::coord {

// A rank's work folder's tar is at most this big unless --snapshot-max-bytes says otherwise.
inline constexpr int64_t kDefaultWorkdirMaxBytes = int64_t{16} << 30;

class WorkdirDataService final : public rpc::WorkdirData::Service {
 public:
  WorkdirDataService(CoordinatorCore* core, const Authorizer* auth, ObjectStore* data,
                     int64_t max_bytes = kDefaultWorkdirMaxBytes)
      : core_(core), auth_(auth), data_(data), max_bytes_(max_bytes) {}

  grpc::Status StoreWorkdir(grpc::ServerContext* ctx, grpc::ServerReader<rpc::StoreWorkdirChunk>* reader,
                            rpc::StoreWorkdirResponse* resp) override;
  grpc::Status FetchWorkdir(grpc::ServerContext* ctx, const rpc::FetchWorkdirRequest* req,
                            grpc::ServerWriter<rpc::DataChunk>* writer) override;

 private:
  CoordinatorCore* const core_;
  const Authorizer* const auth_;
  ObjectStore* const data_;
  const int64_t max_bytes_;
};

// Deletes the data-store keys dropped snapshots left; logs failures.
void DeleteSnapshotOrphans(CoordinatorCore* core, ObjectStore* data);

}  // namespace athanor::coord
