#include "worker/ckptsvc/coordinator_reporter.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/coordinator_channel.h"
#include "common/logging.h"

namespace athanor::ckptsvc {

namespace {

// Makes `call` (with a fresh context and `deadline` each time) up to
// `attempts` times, backing off while the coordinator is unreachable (a
// restart); any other answer ends at once.
template <typename Call>
grpc::Status WithRetries(int attempts, std::chrono::seconds deadline, Call call) {
  grpc::Status s;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    s = call(&ctx);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return s;
    }
  }
  return s;
}

absl::Status ToStatus(const grpc::Status& s, const char* rpc) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(rpc, ": ", s.error_message()));
}

// A list of coordinators: the channel follows the one that leads
// (common/coordinator_targets.h); the agent's main checked the list.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& coordinator,
                                                  std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                  grpc::ChannelArguments args) {
  std::string target = CoordinatorDialTarget(coordinator, &args).value_or(coordinator);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace

CoordinatorReporter::CoordinatorReporter(const std::string& coordinator, std::string node,
                                         std::shared_ptr<grpc::ChannelCredentials> credentials,
                                         const grpc::ChannelArguments& args)
    : node_(std::move(node)),
      stub_(rpc::CheckpointCommit::NewStub(CoordinatorChannel(coordinator, std::move(credentials), args))) {}

absl::Status CoordinatorReporter::ShardDurable(const DurableShard& shard) {
  rpc::ShardDurableRequest req;
  req.set_node(node_);
  req.set_job_id(shard.job);
  req.set_attempt(shard.attempt);
  req.set_step(shard.step);
  req.set_rank(shard.rank);
  req.set_world_size(shard.world_size);
  req.set_shard_key(shard.shard_key);
  req.set_shard_size(shard.shard_size);
  req.set_shard_crc32c(shard.shard_crc32c);
  req.set_manifest_key(shard.manifest_key);
  req.set_manifest_crc32c(shard.manifest_crc32c);
  req.set_keep_last(shard.keep_last);
  rpc::ShardDurableResponse resp;
  const grpc::Status s = WithRetries(5, std::chrono::seconds(60), [&](grpc::ClientContext* ctx) {
    return stub_->ReportShardDurable(ctx, req, &resp);
  });
  if (s.ok() && resp.committed()) {
    ATHANOR_LOG(INFO) << "job " << shard.job << ": step " << shard.step << " committed";
  }
  return ToStatus(s, "ReportShardDurable");
}

absl::Status CoordinatorReporter::ShardUpload(const ShardUploadEvent& event) {
  rpc::ShardUploadRequest req;
  req.set_node(node_);
  req.set_job_id(event.job);
  req.set_attempt(event.attempt);
  req.set_step(event.step);
  req.set_rank(event.rank);
  req.set_world_size(event.world_size);
  req.set_state(event.failed ? rpc::ShardUploadRequest::FAILED : rpc::ShardUploadRequest::HANDED_OFF);
  req.set_error(event.error.substr(0, 4096));
  // Hand-offs are told once with a short deadline (the report races the
  // rank's exit); failures retry like durable shards.
  rpc::ShardUploadResponse resp;
  const grpc::Status s =
      WithRetries(event.failed ? 5 : 1, std::chrono::seconds(event.failed ? 30 : 5),
                  [&](grpc::ClientContext* ctx) { return stub_->ReportShardUpload(ctx, req, &resp); });
  return ToStatus(s, "ReportShardUpload");
}

}  // namespace athanor::ckptsvc
