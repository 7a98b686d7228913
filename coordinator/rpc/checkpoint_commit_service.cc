#include "coordinator/rpc/checkpoint_commit_service.h"

#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "common/status.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/wire/grpc_status.h"

namespace athanor::coord {
namespace {

// The job's own binding: rank `rank` of `world_size` is placed on `node` in
// the job's current (or last) attempt. A node with some other rank of the job
// does not speak for this one: its checkpoint service serves only the ranks
// placed on it.
absl::Status CheckBinding(const JobRecord& job, const std::string& node, int32_t rank,
                          int32_t world_size) {
  if (static_cast<size_t>(world_size) != job.allocation.size()) {
    return absl::PermissionDeniedError(absl::StrCat("world size ", world_size, " is not job ", job.id,
                                                    "'s (", job.allocation.size(), " ranks)"));
  }
  for (const RankPlacement& p : job.allocation) {
    if (p.rank != rank) continue;
    if (p.node == node) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat("rank ", rank, " of job ", job.id, " is placed on node ",
                                                    p.node, ", not on '", node.substr(0, 128), "'"));
  }
  return absl::PermissionDeniedError(absl::StrCat("job ", job.id, " has no rank ", rank));
}

absl::Status CheckReport(const rpc::ShardDurableRequest& r, const JobRecord& job) {
  if (r.world_size() < 1 || r.world_size() > 99999 || r.rank() < 0 || r.rank() >= r.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", r.rank(), " of world size ", r.world_size(), " is not a rank"));
  }
  if (r.step() < 0) return absl::InvalidArgumentError("step: must be >= 0");
  if (r.keep_last() < 0) return absl::InvalidArgumentError("keep_last: must be >= 0");
  if (r.shard_key() != ckpt_layout::ShardKey(job.id, r.step(), r.rank(), r.world_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_key '", r.shard_key(), "' is not rank ", r.rank(), "'s shard of step ",
                     r.step(), " of job ", job.id));
  }
  if (job.spec.checkpoint_uri.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id, " has no checkpoint URI"));
  }
  bool on_node = false;
  for (const RankPlacement& p : job.allocation) on_node = on_node || p.node == r.node();
  if (!on_node) {
    return absl::PermissionDeniedError(
        absl::StrCat("node '", r.node().substr(0, 128), "' holds no rank of job ", job.id));
  }
  // keep_last prunes the job's store after the commit: only the rank's own
  // node may ask for it.
  return CheckBinding(job, r.node(), r.rank(), r.world_size());
}

}  // namespace

absl::Status CheckpointCommitService::Authorize(grpc::CallbackServerContext* ctx,
                                                absl::string_view method,
                                                const absl::StatusOr<JobRecord>& job,
                                                const std::string& node) const {
  AuthTarget target;
  if (job.ok()) {
    for (const RankPlacement& p : job->allocation) target.nodes.push_back(p.node);
  }
  absl::StatusOr<Identity> who = auth_->Check(*ctx, method);
  RETURN_IF_ERROR(who.status());
  RETURN_IF_ERROR(auth_->CheckOwner(*who, method, target));
  if (!who->insecure && node != who->node) {
    return absl::PermissionDeniedError(absl::StrCat(method, ": the report names node '",
                                                    node.substr(0, 128), "', not the caller's (",
                                                    who->Describe(), ")"));
  }
  return job.status();
}

grpc::ServerUnaryReactor* CheckpointCommitService::ReportShardDurable(
    grpc::CallbackServerContext* ctx, const rpc::ShardDurableRequest* req,
    rpc::ShardDurableResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<JobRecord> job = CoreReads(core_).GetJob(req->job_id());
  absl::Status s = Authorize(ctx, "CheckpointCommit.ReportShardDurable", job, req->node());
  if (s.ok()) s = CheckReport(*req, *job);
  if (!s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  const int64_t step = req->step();
  const int64_t before = job->committed_step;
  // The tenant's store, opened with the tenant's credentials only.
  std::optional<std::string> uri = core_->StoreUriFor(*job);
  if (!uri.has_value()) {
    reactor->Finish(ToGrpc(absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, ": its tenant has no credentials for its checkpoint store"))));
    return reactor;
  }
  core_->checkpoint_committer()->CompleteStepsAsync(
      job->id, *uri, req->keep_last(),
      [reactor, resp, step, before](absl::StatusOr<std::optional<int64_t>> r) {
        if (!r.ok()) {
          reactor->Finish(ToGrpc(r.status()));
          return;
        }
        resp->set_committed(r->has_value() && **r >= step);
        resp->set_committed_step(r->has_value() ? std::max(**r, before) : before);
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* CheckpointCommitService::ReportShardUpload(
    grpc::CallbackServerContext* ctx, const rpc::ShardUploadRequest* req,
    rpc::ShardUploadResponse* /*resp*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::StatusOr<JobRecord> job = CoreReads(core_).GetJob(req->job_id());
  absl::Status s = Authorize(ctx, "CheckpointCommit.ReportShardUpload", job, req->node());
  if (s.ok() && (req->world_size() < 1 || req->world_size() > 99999 || req->rank() < 0 ||
                 req->rank() >= req->world_size())) {
    s = absl::InvalidArgumentError(absl::StrCat("rank ", req->rank(), " of world size ",
                                                req->world_size(), " is not a rank"));
  }
  if (s.ok() && (req->step() < 0 || req->attempt() < 1)) {
    s = absl::InvalidArgumentError("step must be >= 0 and attempt >= 1");
  }
  if (s.ok() && req->error().size() > 4096) {
    s = absl::InvalidArgumentError("error: longer than 4096 bytes");
  }
  if (s.ok() && req->attempt() > job->attempt) {
    s = absl::PermissionDeniedError(absl::StrCat("job ", job->id, " has no attempt ", req->attempt()));
  }
  if (s.ok() && req->attempt() == job->attempt) {
    s = CheckBinding(*job, req->node(), req->rank(), req->world_size());
  }
  if (!s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  core_->ReportShardUpload(req->job_id(), req->attempt(), req->step(), req->rank(),
                           req->world_size(),
                           req->state() == rpc::ShardUploadRequest::FAILED, req->error(),
                           [reactor](absl::Status done) { reactor->Finish(ToGrpc(done)); });
  return reactor;
}

}  // namespace athanor::coord
