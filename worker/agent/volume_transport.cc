// The VolumeTransport of a running agent: NodeData.FetchVolume and
// StoreVolume on the coordinator (volume_sync.h).
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/athanor_data.grpc.pb.h"
#include "worker/agent/data_stream.h"
#include "worker/agent/volume_sync.h"

namespace athanor::agent {
namespace {

// A whole volume travels in one call; a stalled stream ends with it.
constexpr auto kTransferDeadline = std::chrono::hours(2);
constexpr auto kReportDeadline = std::chrono::seconds(30);  // a report carries no content

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
    const bool header = reader->Read(&chunk) && chunk.has_header();
    if (header) {
      content.generation = chunk.header().generation();
      content.digest = chunk.header().digest();
      content.size_bytes = chunk.header().size_bytes();
      if (content.generation > 0) {
        absl::StatusOr<int> created = CreateToReceive(tar_path);
        status = created.status();
        if (created.ok()) fd = *created;
      }
      if (status.ok()) {
        absl::StatusOr<int64_t> total =
            ReceivePieces(reader.get(), fd, tar_path, [&](const rpc::VolumeContentChunk& piece, int64_t so_far) {
              if (fd >= 0 && !piece.has_header() && piece.data().size() <= kMaxDataChunk &&
                  so_far <= content.size_bytes) {
                return absl::OkStatus();
              }
              return absl::DataLossError(absl::StrCat("the coordinator sent a second header, a piece over ",
                                                      kMaxDataChunk, " bytes or more than the ", content.size_bytes,
                                                      " announced"));
            });
        status = total.status();
        if (status.ok() && *total != content.size_bytes) {
          status = absl::DataLossError(absl::StrCat("received ", *total, " bytes of ", content.size_bytes));
        }
      }
    }
    if (!status.ok()) ctx.TryCancel();
    grpc::Status s = reader->Finish();
    if (fd >= 0) {
      absl::Status closed = CloseFile(fd, tar_path);
      if (status.ok()) status = closed;
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
    rpc::StoreVolumeChunk chunk;
    rpc::StoreVolumeHeader* h = chunk.mutable_header();
    h->set_job_id(job_id);
    h->set_attempt(attempt);
    h->set_volume(volume);
    h->set_base_generation(base_generation);
    h->set_size_bytes(content.size_bytes);
    h->set_digest(content.digest);
    rpc::StoreVolumeResponse resp;
    return SendFile(tar_path, kTransferDeadline, chunk,
                    [&](grpc::ClientContext* ctx) { return stub_->StoreVolume(ctx, &resp); });
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
  return std::make_unique<CoordinatorVolumeTransport>(CoordinatorDataChannel(coordinator, tls));
}

}  // namespace athanor::agent
