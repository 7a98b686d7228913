// The ImageFetcher of a running agent: NodeData.FetchImage on the coordinator.
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/athanor_data.grpc.pb.h"
#include "worker/agent/data_stream.h"
#include "worker/agent/image_cache_fetcher.h"

namespace athanor::agent {
namespace {

// A whole image travels in one call; a stalled stream ends with it.
constexpr auto kFetchDeadline = std::chrono::hours(1);

class CoordinatorImageFetcher : public ImageFetcher {
 public:
  explicit CoordinatorImageFetcher(std::shared_ptr<grpc::Channel> channel)
      : stub_(rpc::NodeData::NewStub(std::move(channel))) {}

  absl::Status Fetch(const std::string& digest, const std::string& path, int64_t max_bytes) override {
    absl::StatusOr<int> fd = CreateToReceive(path);
    if (!fd.ok()) return fd.status();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kFetchDeadline);
    rpc::FetchImageRequest req;
    req.set_digest(digest);
    std::unique_ptr<grpc::ClientReader<rpc::DataChunk>> reader = stub_->FetchImage(&ctx, req);
    absl::Status status =
        ReceivePieces(reader.get(), *fd, path, [&](const rpc::DataChunk& chunk, int64_t total) {
          if (chunk.data().size() > kMaxDataChunk) {
            return absl::DataLossError(absl::StrCat("the coordinator sent a chunk of ", chunk.data().size(),
                                                    " bytes (at most ", kMaxDataChunk, ")"));
          }
          if (total > max_bytes) {
            return absl::ResourceExhaustedError(
                absl::StrCat("the image is over the cache's ", max_bytes, " bytes (--image-cache-bytes)"));
          }
          return absl::OkStatus();
        }).status();
    if (!status.ok()) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    absl::Status closed = CloseFile(*fd, path);
    if (status.ok()) status = closed;
    if (status.ok() && !s.ok()) status = FromGrpc(s, "fetching from the coordinator");
    return status;
  }

 private:
  std::unique_ptr<rpc::NodeData::Stub> stub_;
};

}  // namespace

std::unique_ptr<ImageFetcher> MakeCoordinatorImageFetcher(const std::string& coordinator,
                                                          const std::optional<security::TlsMaterial>& tls) {
  return std::make_unique<CoordinatorImageFetcher>(CoordinatorDataChannel(coordinator, tls));
}

}  // namespace athanor::agent
