// NodeDataService's volume calls (node_data_service.h): agents fetch a
// volume's content before a job's first rank on their node starts, and
// store it back when the job's box there ends.
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/core_volumes.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/blob_intake.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

absl::Status CheckTarget(const std::string& job_id, const std::string& volume) {
  RETURN_IF_ERROR(ValidateName("job_id", job_id));
  return ValidateResourceName("volume", volume);
}

}  // namespace

grpc::Status NodeDataService::FetchVolume(grpc::ServerContext* ctx, const rpc::FetchVolumeRequest* req,
                                          grpc::ServerWriter<rpc::VolumeContentChunk>* writer) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "NodeData.FetchVolume");
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckTarget(req->job_id(), req->volume()); !s.ok()) return ToGrpc(s);
  absl::StatusOr<rpc::Volume> v = CoreVolumes(core_).ForFetch(who->node, req->job_id(), req->attempt(), req->volume());
  if (!v.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.FetchVolume refused to " << who->Describe() << ": " << v.status();
    return ToGrpc(v.status());
  }
  rpc::VolumeContentChunk head;
  head.mutable_header()->set_generation(v->generation());
  head.mutable_header()->set_digest(v->digest());
  head.mutable_header()->set_size_bytes(v->used_bytes());
  if (!writer->Write(head)) return grpc::Status(grpc::StatusCode::CANCELLED, "the agent went away");
  if (v->generation() == 0) return grpc::Status::OK;  // empty: nothing stored yet
  const std::string key = VolumeBlobKey(v->tenant(), v->name(), v->generation());
  absl::Status sent = StreamObject(data_, key, static_cast<uint64_t>(v->used_bytes()), [&](std::string piece) {
    rpc::VolumeContentChunk chunk;
    *chunk.mutable_data() = std::move(piece);
    return writer->Write(chunk);
  });
  if (!sent.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.FetchVolume " << v->tenant() << "/" << v->name() << " generation "
                         << v->generation() << " to " << who->Describe() << ": " << sent;
    return ToGrpc(sent);
  }
  return grpc::Status::OK;
}

grpc::Status NodeDataService::StoreVolume(grpc::ServerContext* ctx,
                                          grpc::ServerReader<rpc::StoreVolumeChunk>* reader,
                                          rpc::StoreVolumeResponse* resp) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "NodeData.StoreVolume");
  if (!who.ok()) return ToGrpc(who.status());
  rpc::StoreVolumeChunk first;
  if (!reader->Read(&first) || !first.has_header() || !first.data().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "StoreVolume: the first message must hold the header alone");
  }
  const rpc::StoreVolumeHeader h = first.header();
  if (absl::Status s = CheckTarget(h.job_id(), h.volume()); !s.ok()) return ToGrpc(s);
  CoreVolumes volumes(core_);
  // size_bytes 0 stores nothing (no tar is empty): the agent reports that its
  // copy is as fetched, or could not be stored (it logs why). Either way, and
  // whatever a store's outcome, the call ends what the attempt owed: a
  // requeued job waiting for it may start (volumes/owed_stores.h).
  if (h.size_bytes() == 0) {
    absl::Status s = volumes.EndStore(who->node, h.job_id(), h.attempt(), h.volume());
    if (!s.ok()) {
      ATHANOR_LOG(WARNING) << "NodeData.StoreVolume (nothing to store) refused to " << who->Describe() << ": " << s;
    }
    return ToGrpc(s);
  }
  absl::Cleanup ended = [&] { volumes.EndStore(who->node, h.job_id(), h.attempt(), h.volume()).IgnoreError(); };
  if (absl::Status s = CheckDigest(h.digest()); !s.ok()) return ToGrpc(s);
  if (h.size_bytes() < 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "size_bytes: below 0");
  absl::StatusOr<VolumeUpload> up =
      volumes.ReserveStore(who->node, h.job_id(), h.attempt(), h.volume(), h.base_generation());
  if (!up.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.StoreVolume refused to " << who->Describe() << ": " << up.status();
    return ToGrpc(up.status());
  }
  const std::string name = absl::StrCat(up->tenant, "/", h.volume());
  if (h.size_bytes() > up->size_limit_bytes) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("volume ", name, ": ", h.size_bytes(), " bytes pass its size limit of ",
                                     up->size_limit_bytes, " bytes"));
  }
  // 1. The new generation's blob, whole and checked, under a key no
  //    committed record names yet.
  const std::string key = VolumeBlobKey(up->tenant, h.volume(), up->generation);
  absl::StatusOr<std::unique_ptr<WritableObject>> out = data_->OpenWrite(key, PutMode::kOverwrite);
  if (!out.ok()) return ToGrpc(out.status());
  absl::StatusOr<int64_t> received =
      ReceiveBlob<rpc::StoreVolumeChunk>(reader, "StoreVolume", h.size_bytes(), h.digest(), out->get());
  if (!received.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.StoreVolume " << name << " from " << who->Describe() << ": " << received.status();
    return ToGrpc(received.status());
  }
  const int64_t got = *received;
  if (absl::Status s = (*out)->Close(); !s.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.StoreVolume " << name << ": " << data_->Describe() << ": " << s;
    return ToGrpc(s);
  }
  // 2. The record moves to it, durably; until then the old generation stands.
  absl::StatusOr<rpc::Volume> v = volumes.CommitStore(h.volume(), *up, h.base_generation(), h.digest(), got);
  if (!v.ok()) {
    ATHANOR_LOG(WARNING) << "NodeData.StoreVolume " << name << " generation " << up->generation
                         << " not committed (the volume keeps generation " << h.base_generation() << "): "
                         << v.status();
    // A refused commit left the record as it was: the blob is no one's. A
    // failed write to the state database left the record moved in memory,
    // to be retried with the next commit: the blob must stay.
    absl::StatusOr<rpc::Volume> now = volumes.Get(up->tenant, h.volume());
    if (!now.ok() || now->generation() != up->generation) {
      if (absl::Status s = data_->Delete(key); !s.ok()) {
        ATHANOR_LOG(WARNING) << "and its blob " << key << " stays: " << s;
      }
    }
    return ToGrpc(v.status());
  }
  ATHANOR_LOG(INFO) << who->Describe() << ": volume " << name << " stored by job " << h.job_id() << " attempt "
                    << h.attempt() << ": generation " << v->generation() << ", " << got << " bytes";
  // 3. The previous blob, unless a snapshot still holds it.
  if (h.base_generation() > 0 && !VolumeRegistry::Referenced(*v, h.base_generation())) {
    const std::string old = VolumeBlobKey(up->tenant, h.volume(), h.base_generation());
    if (absl::Status s = data_->Delete(old); !s.ok()) {
      ATHANOR_LOG(WARNING) << "volume " << name << ": the previous generation's blob " << old << " stays: " << s;
    }
  }
  *resp->mutable_volume() = *std::move(v);
  return grpc::Status::OK;
}

}  // namespace athanor::coord
