#include "coordinator/rpc/node_data_service.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/images/image_registry.h"
#include "coordinator/rpc/rpc_caller.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

// Whether `node` should run a rank whose job runs `digest` ("" node: any
// non-terminal job, for --insecure, which has no node identity).
bool NodeRunsImage(const ClusterState& state, const std::string& node, const std::string& digest) {
  if (node.empty()) {
    for (const auto& [seq, job] : state.jobs().all()) {
      if (!IsTerminal(job.state) && job.image_digest == digest) return true;
    }
    return false;
  }
  for (const DesiredRank& r : ClusterAgents::DesiredFor(state, node)) {
    if (r.image_digest == digest) return true;
  }
  return false;
}

// One FetchImage stream: sends the next piece each time the last one is
// written. gRPC serialises a reactor's reactions; it deletes itself once done.
class ImageSender final : public grpc::ServerWriteReactor<rpc::DataChunk> {
 public:
  // Answers `status` at once (a refusal).
  explicit ImageSender(const grpc::Status& status) { Finish(status); }
  ImageSender(ObjectStore* store, std::string key, uint64_t size, std::string what)
      : store_(store), key_(std::move(key)), size_(size), what_(std::move(what)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Fail(absl::CancelledError("the peer went away"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (offset_ >= size_) {
      Finish(grpc::Status::OK);
      return;
    }
    const uint64_t n = std::min<uint64_t>(kDataChunkBytes, size_ - offset_);
    absl::StatusOr<std::string> piece = store_->Get(key_, offset_, static_cast<int64_t>(n));
    if (!piece.ok()) {
      Fail(piece.status());
      return;
    }
    if (piece->size() != n) {
      Fail(absl::DataLossError(absl::StrCat(store_->Describe(), ": ", key_, " at ", offset_, ": read ",
                                            piece->size(), " bytes of ", n)));
      return;
    }
    offset_ += n;
    *chunk_.mutable_data() = *std::move(piece);
    StartWrite(&chunk_);
  }
  void Fail(const absl::Status& s) {
    ATHANOR_LOG(WARNING) << "NodeData.FetchImage " << what_ << ": " << s;
    Finish(ToGrpc(s));
  }

  ObjectStore* const store_ = nullptr;
  const std::string key_;
  const uint64_t size_ = 0;
  const std::string what_;
  uint64_t offset_ = 0;
  rpc::DataChunk chunk_;  // in flight until OnWriteDone
};

}  // namespace

absl::Status StreamObject(ObjectStore* store, const std::string& key, uint64_t size,
                          const std::function<bool(std::string piece)>& send) {
  for (uint64_t offset = 0; offset < size;) {
    const uint64_t n = std::min<uint64_t>(kDataChunkBytes, size - offset);
    absl::StatusOr<std::string> piece = store->Get(key, offset, static_cast<int64_t>(n));
    if (!piece.ok()) return piece.status();
    if (piece->size() != n) {
      return absl::DataLossError(absl::StrCat(store->Describe(), ": ", key, " at ", offset, ": read ",
                                              piece->size(), " bytes of ", n));
    }
    if (!send(*std::move(piece))) return absl::CancelledError("the peer went away");
    offset += n;
  }
  return absl::OkStatus();
}

grpc::ServerWriteReactor<rpc::DataChunk>* NodeDataService::FetchImage(grpc::CallbackServerContext* ctx,
                                                                      const rpc::FetchImageRequest* req) {
  absl::StatusOr<Identity> who = AuthorizeCall(auth_, *ctx, "NodeData.FetchImage");
  if (!who.ok()) return new ImageSender(ToGrpc(who.status()));
  if (absl::Status s = ValidateImageDigest("digest", req->digest()); !s.ok()) return new ImageSender(ToGrpc(s));
  bool allowed = false;
  core_->Read([&](const ClusterState& s) { allowed = NodeRunsImage(s, who->node, req->digest()); });
  if (!allowed) {
    ATHANOR_LOG(WARNING) << "NodeData.FetchImage refused: " << who->Describe() << " runs no job of image "
                         << req->digest();
    return new ImageSender(
        grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                     absl::StrCat("image ", req->digest(), ": no job placed on the caller's node runs it (",
                                  who->Describe(), ")")));
  }
  const std::string key = ImageBlobKey(req->digest());
  absl::StatusOr<ObjectInfo> info = data_->Head(key);
  if (!info.ok()) return new ImageSender(ToGrpc(info.status()));
  return new ImageSender(data_, key, info->size, absl::StrCat(req->digest(), " to ", who->Describe()));
}

}  // namespace athanor::coord
