#include "coordinator/rpc/workdir_data_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/core_snapshots.h"
#include "coordinator/model/validation.h"
#include "coordinator/rpc/blob_intake.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

absl::Status CheckTarget(const std::string& job_id, int32_t rank, const std::string& key) {
  RETURN_IF_ERROR(ValidateName("job_id", job_id));
  if (rank < 0) return absl::InvalidArgumentError("rank: below 0");
  if (key.empty() || key.size() > kMaxStringBytes) return absl::InvalidArgumentError("key: empty, or too long");
  return absl::OkStatus();
}

}  // namespace

void DeleteSnapshotOrphans(CoordinatorCore* core, ObjectStore* data) {
  for (const std::string& key : CoreSnapshots(core).TakeOrphans()) {
    absl::Status s = data->Delete(key);
    if (!s.ok() && !absl::IsNotFound(s)) ATHANOR_LOG(WARNING) << "snapshot blob " << key << " stays: " << s;
  }
}

grpc::Status WorkdirDataService::StoreWorkdir(grpc::ServerContext* ctx,
                                              grpc::ServerReader<rpc::StoreWorkdirChunk>* reader,
                                              rpc::StoreWorkdirResponse*) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "WorkdirData.StoreWorkdir");
  if (!who.ok()) return ToGrpc(who.status());
  DeleteSnapshotOrphans(core_, data_);
  rpc::StoreWorkdirChunk first;
  if (!reader->Read(&first) || !first.has_header() || !first.data().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "StoreWorkdir: the first message must hold the header alone");
  }
  const rpc::StoreWorkdirHeader h = first.header();
  if (absl::Status s = CheckTarget(h.job_id(), h.rank(), h.key()); !s.ok()) return ToGrpc(s);
  if (absl::Status s = CheckDigest(h.digest()); !s.ok()) return ToGrpc(s);
  if (h.size_bytes() <= 0 || h.size_bytes() > max_bytes_) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("StoreWorkdir: size_bytes ", h.size_bytes(), " is not in 1..", max_bytes_,
                                     " (--snapshot-max-bytes)"));
  }
  CoreSnapshots snapshots(core_);
  absl::StatusOr<WorkdirUpload> up = snapshots.ForStore(who->node, h.job_id(), h.attempt(), h.rank(), h.key());
  if (!up.ok()) {
    ATHANOR_LOG(WARNING) << "WorkdirData.StoreWorkdir refused to " << who->Describe() << ": " << up.status();
    return ToGrpc(up.status());
  }
  // 1. The blob, whole and checked, under the key the record will name.
  absl::StatusOr<std::unique_ptr<WritableObject>> out = data_->OpenWrite(h.key(), PutMode::kOverwrite);
  if (!out.ok()) return ToGrpc(out.status());
  absl::StatusOr<int64_t> received =
      ReceiveBlob<rpc::StoreWorkdirChunk>(reader, "StoreWorkdir", h.size_bytes(), h.digest(), out->get());
  if (!received.ok()) {
    ATHANOR_LOG(WARNING) << "WorkdirData.StoreWorkdir " << h.key() << " from " << who->Describe() << ": " << received.status();
    return ToGrpc(received.status());
  }
  const int64_t got = *received;
  if (absl::Status s = (*out)->Close(); !s.ok()) return ToGrpc(s);
  // 2. The record names it, durably.
  absl::StatusOr<rpc::InstanceSnapshot> s = snapshots.WorkdirStored(up->snapshot_id, h.rank(), got);
  if (!s.ok()) {
    ATHANOR_LOG(WARNING) << "WorkdirData.StoreWorkdir " << h.key() << ": not recorded: " << s.status();
    if (absl::Status d = data_->Delete(h.key()); !d.ok()) ATHANOR_LOG(WARNING) << "and the blob stays: " << d;
    return ToGrpc(s.status());
  }
  ATHANOR_LOG(INFO) << who->Describe() << ": snapshot " << s->id() << " rank " << h.rank() << "'s work folder stored ("
                    << got << " bytes)" << (s->complete() ? "; the snapshot is complete" : "");
  return grpc::Status::OK;
}

grpc::Status WorkdirDataService::FetchWorkdir(grpc::ServerContext* ctx, const rpc::FetchWorkdirRequest* req,
                                              grpc::ServerWriter<rpc::DataChunk>* writer) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "WorkdirData.FetchWorkdir");
  if (!who.ok()) return ToGrpc(who.status());
  if (absl::Status s = CheckTarget(req->job_id(), req->rank(), req->key()); !s.ok()) return ToGrpc(s);
  absl::Status allowed = CoreSnapshots(core_).ForFetch(who->node, req->job_id(), req->attempt(), req->rank(), req->key());
  if (!allowed.ok()) {
    ATHANOR_LOG(WARNING) << "WorkdirData.FetchWorkdir refused to " << who->Describe() << ": " << allowed;
    return ToGrpc(allowed);
  }
  absl::StatusOr<ObjectInfo> info = data_->Head(req->key());
  if (!info.ok()) return ToGrpc(info.status());
  absl::Status sent = StreamObject(data_, req->key(), info->size, [&](std::string piece) {
    rpc::DataChunk chunk;
    *chunk.mutable_data() = std::move(piece);
    return writer->Write(chunk);
  });
  if (!sent.ok()) {
    ATHANOR_LOG(WARNING) << "WorkdirData.FetchWorkdir " << req->key() << " to " << who->Describe() << ": " << sent;
    return ToGrpc(sent);
  }
  return grpc::Status::OK;
}

}  // namespace athanor::coord
