// The ImageFetcher of a running agent: NodeData.FetchImage on the coordinator.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/athanor_data.grpc.pb.h"
#include "security/cluster_ca.h"
#include "worker/agent/image_cache_fetcher.h"

namespace athanor::agent {
namespace {

// A whole image travels in one call; a stalled stream ends with it.
constexpr auto kFetchDeadline = std::chrono::hours(1);
constexpr size_t kMaxChunk = size_t{1} << 20;  // DataChunk's documented bound

class CoordinatorImageFetcher : public ImageFetcher {
 public:
  explicit CoordinatorImageFetcher(std::shared_ptr<grpc::Channel> channel)
      : stub_(rpc::NodeData::NewStub(std::move(channel))) {}

  absl::Status Fetch(const std::string& digest, const std::string& path, int64_t max_bytes) override {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return absl::InternalError(absl::StrCat("create ", path, ": ", strerror(errno)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kFetchDeadline);
    rpc::FetchImageRequest req;
    req.set_digest(digest);
    std::unique_ptr<grpc::ClientReader<rpc::DataChunk>> reader = stub_->FetchImage(&ctx, req);
    rpc::DataChunk chunk;
    int64_t total = 0;
    absl::Status status;
    while (status.ok() && reader->Read(&chunk)) {
      const std::string& data = chunk.data();
      if (data.size() > kMaxChunk) {
        status = absl::DataLossError(absl::StrCat("the coordinator sent a chunk of ", data.size(),
                                                  " bytes (at most ", kMaxChunk, ")"));
        break;
      }
      total += static_cast<int64_t>(data.size());
      if (total > max_bytes) {
        status = absl::ResourceExhaustedError(
            absl::StrCat("the image is over the cache's ", max_bytes, " bytes (--image-cache-bytes)"));
        break;
      }
      size_t done = 0;
      while (done < data.size()) {
        ssize_t n = write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          status = absl::InternalError(absl::StrCat("write ", path, ": ", strerror(errno)));
          break;
        }
        done += static_cast<size_t>(n);
      }
    }
    if (!status.ok()) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    if (close(fd) != 0 && status.ok()) status = absl::InternalError(absl::StrCat("close ", path, ": ", strerror(errno)));
    if (status.ok() && !s.ok()) {
      status = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                            absl::StrCat("fetching from the coordinator: ", s.error_message()));
    }
    return status;
  }

 private:
  std::unique_ptr<rpc::NodeData::Stub> stub_;
};

}  // namespace

std::unique_ptr<ImageFetcher> MakeCoordinatorImageFetcher(const std::string& coordinator,
                                                          const std::optional<security::TlsMaterial>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 4 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      tls ? security::ClientCredentials(*tls, security::kCoordinatorName, "", &args)
          : grpc::InsecureChannelCredentials();
  return std::make_unique<CoordinatorImageFetcher>(grpc::CreateCustomChannel(coordinator, creds, args));
}

}  // namespace athanor::agent
