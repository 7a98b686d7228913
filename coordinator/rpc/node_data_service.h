// The NodeData gRPC service: agents fetch the content their ranks need from
// the coordinator's data store (proto/athanor_data.proto). Agents never read
// the data store themselves; the coordinator checks that the asking node
// runs a job that uses what it asks for:
//   - FetchImage (node_data_service.cc): an image's tar, by digest, for a
//     node with a desired rank whose job runs that image;
//   - FetchVolume, StoreVolume (node_data_volumes.cc): a volume's content,
//     for a node with a rank of the job that mounts it.
// Node role only (auth_policy.cc); with --insecure there is no node identity,
// and FetchImage serves any digest a non-terminal job uses.
//
// FetchImage is on gRPC's callback API (a stream holds no server thread);
// the volume calls on the synchronous one (each stream holds one of the
// server's threads for its length). Content goes in pieces of at most
// kDataChunkBytes, read from the store one at a time.
//
// Thread-safe (gRPC calls it from many threads; the data store is). The
// core, the authorizer and the data store are not owned and outlive it.
#pragma once

#include <cstdint>

#include "checkpoint/object_store.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/core/coordinator_core.h"
#include "proto/athanor_data.grpc.pb.h"

namespace athanor::coord {

// The most one message of a data stream carries (the proto's contract).
inline constexpr int64_t kDataChunkBytes = 1 << 20;

// FetchImage on gRPC's callback API (a node's fetch holds no server thread:
// a job starting on many nodes fetches its image on all of them at once);
// the volume calls on the synchronous one.
class NodeDataService final : public rpc::NodeData::WithCallbackMethod_FetchImage<rpc::NodeData::Service> {
 public:
  NodeDataService(CoordinatorCore* core, const Authorizer* auth, ObjectStore* data)
      : core_(core), auth_(auth), data_(data) {}

  // ---- images (node_data_service.cc)
  // PermissionDenied unless the caller's node has a desired rank of a job
  // running `digest`; NotFound when the store lacks the blob. Each piece is
  // read from the store when the last one was sent (on gRPC's callback
  // thread: one bounded read at a time per fetch).
  grpc::ServerWriteReactor<rpc::DataChunk>* FetchImage(grpc::CallbackServerContext* ctx,
                                                       const rpc::FetchImageRequest* req) override;

  // ---- volumes (node_data_volumes.cc)
  // Only for an attempt of a job placed on the caller's node that mounts the
  // volume (core/cluster_volumes.h): PermissionDenied otherwise. Fetch: the
  // header (generation, digest, size), then the current tar (none at
  // generation 0). Store, for a read-write mount only: Aborted unless
  // base_generation is the current one; ResourceExhausted naming the limit
  // when size_bytes passes it (checked before any byte is read);
  // InvalidArgument when the bytes sent are not size_bytes long or do not
  // hash to the digest. The blob is written first, the record committed
  // second, the previous blob deleted last (unless a snapshot keeps it): a
  // crash at any point leaves the last committed generation whole.
  grpc::Status FetchVolume(grpc::ServerContext* ctx, const rpc::FetchVolumeRequest* req,
                           grpc::ServerWriter<rpc::VolumeContentChunk>* writer) override;
  grpc::Status StoreVolume(grpc::ServerContext* ctx, grpc::ServerReader<rpc::StoreVolumeChunk>* reader,
                           rpc::StoreVolumeResponse* resp) override;

 private:
  CoordinatorCore* const core_;
  const Authorizer* const auth_;
  ObjectStore* const data_;
};

// Streams the object `key` of `store` (`size` bytes long) to `send` in
// pieces of at most kDataChunkBytes. Stops at the first error (the store's,
// or Cancelled when `send` returns false: the peer went away).
absl::Status StreamObject(ObjectStore* store, const std::string& key, uint64_t size,
                          const std::function<bool(std::string piece)>& send);

}  // namespace athanor::coord
