// The VolumeTransport of a running agent: NodeData.FetchVolume and
// StoreVolume on the coordinator (volume_sync.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/athanor_data.grpc.pb.h"
#include "security/cluster_ca.h"
#include "worker/agent/volume_sync.h"

namespace athanor::agent {
namespace {

// A whole volume travels in one call; a stalled stream ends with it.
constexpr auto kTransferDeadline = std::chrono::hours(2);
constexpr auto kReportDeadline = std::chrono::seconds(30);  // a report carries no content
constexpr size_t kMaxChunk = size_t{1} << 20;  // the proto's documented bound

absl::Status FromGrpc(const grpc::Status& s, const char* what) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), absl::StrCat(what, ": ", s.error_message()));
}

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("write ", path, ": ", strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

class CoordinatorVolumeTransport : public VolumeTransport {
 public:
  explicit CoordinatorVolumeTransport(std::shared_ptr<grpc::Channel> channel)
      : stub_(rpc::NodeData::NewStub(std::move(channel))) {}

  absl::StatusOr<VolumeContent> Fetch(const std::string& job_id, int32_t attempt, const std::string& volume,
                                      const std::string& tar_path) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kTransferDeadline);
    rpc::FetchVolumeRequest req;
    req.set_job_id(job_id);
    req.set_attempt(attempt);
    req.set_volume(volume);
    std::unique_ptr<grpc::ClientReader<rpc::VolumeContentChunk>> reader = stub_->FetchVolume(&ctx, req);
    rpc::VolumeContentChunk chunk;
    VolumeContent content;
    absl::Status status;
    int fd = -1;
    int64_t total = 0;
    const bool header = reader->Read(&chunk) && chunk.has_header();
    if (header) {
      content.generation = chunk.header().generation();
      content.digest = chunk.header().digest();
      content.size_bytes = chunk.header().size_bytes();
      if (content.generation > 0) {
        fd = open(tar_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) status = absl::InternalError(absl::StrCat("create ", tar_path, ": ", strerror(errno)));
      }
      while (status.ok() && reader->Read(&chunk)) {
        const std::string& data = chunk.data();
        total += static_cast<int64_t>(data.size());
        if (fd < 0 || chunk.has_header() || data.size() > kMaxChunk || total > content.size_bytes) {
          status = absl::DataLossError(absl::StrCat("the coordinator sent a second header, a piece over ", kMaxChunk,
                                                    " bytes or more than the ", content.size_bytes, " announced"));
          break;
        }
        status = WriteAll(fd, data, tar_path);
      }
      if (status.ok() && total != content.size_bytes) {
        status = absl::DataLossError(absl::StrCat("received ", total, " bytes of ", content.size_bytes));
      }
    }
    if (!status.ok()) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    if (fd >= 0 && close(fd) != 0 && status.ok()) {
      status = absl::InternalError(absl::StrCat("close ", tar_path, ": ", strerror(errno)));
    }
    if (!s.ok()) return FromGrpc(s, "the coordinator");
    if (!status.ok()) return status;
    if (!header || content.generation < 0 || (content.generation == 0 && content.size_bytes != 0)) {
      return absl::DataLossError("the coordinator sent no header, or a header that does not read");
    }
    return content;
  }

  absl::Status Store(const std::string& job_id, int32_t attempt, const std::string& volume, int64_t base_generation,
                     const std::string& tar_path, const VolumeContent& content) override {
    int fd = open(tar_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return absl::InternalError(absl::StrCat("open ", tar_path, ": ", strerror(errno)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kTransferDeadline);
    rpc::StoreVolumeResponse resp;
    std::unique_ptr<grpc::ClientWriter<rpc::StoreVolumeChunk>> writer = stub_->StoreVolume(&ctx, &resp);
    rpc::StoreVolumeChunk chunk;
    rpc::StoreVolumeHeader* h = chunk.mutable_header();
    h->set_job_id(job_id);
    h->set_attempt(attempt);
    h->set_volume(volume);
    h->set_base_generation(base_generation);
    h->set_size_bytes(content.size_bytes);
    h->set_digest(content.digest);
    absl::Status status;
    bool open_stream = writer->Write(chunk);
    std::string buf(kMaxChunk, '\0');
    while (open_stream && status.ok()) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) status = absl::InternalError(absl::StrCat("read ", tar_path, ": ", strerror(errno)));
      if (n <= 0) break;
      rpc::StoreVolumeChunk piece;
      piece.set_data(buf.data(), static_cast<size_t>(n));
      open_stream = writer->Write(piece);  // false: the coordinator ended the call (Finish says why)
    }
    close(fd);
    if (!status.ok()) ctx.TryCancel();
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!status.ok()) return status;
    if (!s.ok()) return FromGrpc(s, "the coordinator refused it");
    return absl::OkStatus();
  }

  absl::Status Report(const std::string& job_id, int32_t attempt, const std::string& volume,
                      int64_t base_generation) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kReportDeadline);
    rpc::StoreVolumeResponse resp;
    std::unique_ptr<grpc::ClientWriter<rpc::StoreVolumeChunk>> writer = stub_->StoreVolume(&ctx, &resp);
    rpc::StoreVolumeChunk chunk;
    rpc::StoreVolumeHeader* h = chunk.mutable_header();
    h->set_job_id(job_id);
    h->set_attempt(attempt);
    h->set_volume(volume);
    h->set_base_generation(base_generation);
    h->set_size_bytes(0);  // nothing stored (node_data_volumes.cc)
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (!s.ok()) return FromGrpc(s, "the coordinator refused it");
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<rpc::NodeData::Stub> stub_;
};

}  // namespace

std::unique_ptr<VolumeTransport> MakeCoordinatorVolumeTransport(const std::string& coordinator,
                                                                const std::optional<security::TlsMaterial>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 4 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      tls ? security::ClientCredentials(*tls, security::kCoordinatorName, "", &args)
          : grpc::InsecureChannelCredentials();
  return std::make_unique<CoordinatorVolumeTransport>(grpc::CreateCustomChannel(coordinator, creds, args));
}

}  // namespace athanor::agent
