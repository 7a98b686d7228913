#include "coordinator/rpc/agent_service.h"

#include <algorithm>
#include <atomic>

#include "common/logging.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/images/image_registry.h"
#include "coordinator/observability/telemetry_intake.h"
#include "coordinator/wire/grpc_status.h"
#include "coordinator/wire/proto_convert.h"

namespace athanor::coord {
namespace {

// The most digests of an agent's image cache a heartbeat is heard for.
constexpr size_t kMaxCachedImages = 4096;

// One heartbeat call. It finishes when the core answers; if the agent
// cancels first (it has an exit to report), the parked poll is answered
// CANCELLED. gRPC deletes nothing: OnDone deletes the reactor.
class HeartbeatReactor final : public grpc::ServerUnaryReactor {
 public:
  HeartbeatReactor(CoordinatorCore* core, const SecretStore* secrets, rpc::HeartbeatResponse* resp)
      : core_(core), secrets_(secrets), resp_(resp), id_(core->NewPollId()) {}

  void Start(HeartbeatRequest req) {
    core_->Heartbeat(id_, std::move(req), [this](HeartbeatResult r) { Answer(std::move(r)); });
  }
  void OnCancel() override { core_->CancelHeartbeat(id_); }
  void OnDone() override { delete this; }

 private:
  void Answer(HeartbeatResult r) {
    if (!r.status.ok()) {
      Finish(ToGrpc(r.status));
      return;
    }
    resp_->set_reregister(r.reregister);
    resp_->set_generation(r.generation);
    resp_->set_held_ms(std::chrono::duration_cast<std::chrono::milliseconds>(r.held).count());
    for (const DesiredRank& d : r.desired) {
      rpc::RankSpec* spec = resp_->add_desired();
      ToProto(d, spec);
      // The tenant's store credentials, added here only (never in the job's record).
      if (secrets_ != nullptr) {
        for (const auto& [k, v] : secrets_->RankEnv(d.tenant)) (*spec->mutable_env())[k] = v;
      }
    }
    Finish(grpc::Status::OK);
  }

  CoordinatorCore* const core_;
  const SecretStore* const secrets_;
  rpc::HeartbeatResponse* const resp_;
  const LongPolls::Id id_;
};

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(s));
  return reactor;
}

}  // namespace

absl::Status AgentService::Authorize(const grpc::CallbackServerContext& ctx,
                                     absl::string_view method, const AuthTarget& target) {
  absl::StatusOr<Identity> who = auth_->Check(ctx, method);
  absl::Status s = who.ok() ? auth_->CheckOwner(*who, method, target) : who.status();
  if (!s.ok()) ATHANOR_LOG(WARNING) << method << " refused: " << s.message();
  return s;
}

grpc::ServerUnaryReactor* AgentService::RegisterNode(grpc::CallbackServerContext* ctx,
                                                     const rpc::RegisterNodeRequest* req,
                                                     rpc::RegisterNodeResponse* resp) {
  if (absl::Status s = Authorize(*ctx, "NodeAgent.RegisterNode", {.node = req->name()}); !s.ok()) {
    return Refuse(ctx, s);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int64_t interval_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(pace_->Interval()).count();
  core_->RegisterNode(FromProto(*req), FromProto(req->ranks()),
                      [reactor, resp, interval_ms](absl::Status s) {
                        if (s.ok()) resp->set_heartbeat_interval_ms(interval_ms);
                        reactor->Finish(ToGrpc(s));
                      });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                  const rpc::HeartbeatRequest* req,
                                                  rpc::HeartbeatResponse* resp) {
  if (absl::Status s = Authorize(*ctx, "NodeAgent.Heartbeat", {.node = req->node()}); !s.ok()) {
    return Refuse(ctx, s);
  }
  if (req->max_wait_ms() < 0) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_wait_ms: must be >= 0"));
    return reactor;
  }
  if (telemetry_ != nullptr && (req->telemetry_size() > 0 || req->gpus_size() > 0)) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    // Telemetry is best effort: a bad part is dropped, the heartbeat still counts.
    absl::Status s = TakeTelemetry(*req, now_ms, telemetry_, core_);
    if (!s.ok()) ATHANOR_LOG(WARNING) << "node " << req->node().substr(0, 64) << ": " << s;
  }
  HeartbeatRequest in;
  in.node = req->node();
  in.known_generation = req->known_generation();
  in.ranks = FromProto(req->ranks());
  const Duration interval = pace_->Interval();
  in.max_wait = std::min<Duration>(Millis(req->max_wait_ms()), interval);
  // The interval to use from now on (it stretches as the fleet grows).
  resp->set_heartbeat_interval_ms(std::chrono::duration_cast<std::chrono::milliseconds>(interval).count());
  in.health_ok = req->health_ok() || req->health_message().empty();
  in.health_message = req->health_message();
  // The agent's image cache, for the node's view: valid digests only, and
  // no more than a cache could plausibly hold.
  for (const std::string& d : req->cached_images()) {
    if (in.cached_images.size() >= kMaxCachedImages) break;
    if (ValidateImageDigest("cached_images", d).ok()) in.cached_images.push_back(d);
  }
  auto* reactor = new HeartbeatReactor(core_, secrets_, resp);
  reactor->Start(std::move(in));
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::ReportCheckpoint(grpc::CallbackServerContext* ctx,
                                                         const rpc::ReportCheckpointRequest* req,
                                                         rpc::ReportCheckpointResponse*) {
  AuthTarget target;
  if (absl::StatusOr<JobRecord> job = CoreReads(core_).GetJob(req->job_id()); job.ok()) {
    for (const RankPlacement& p : job->allocation) target.nodes.push_back(p.node);
  }
  if (absl::Status s = Authorize(*ctx, "NodeAgent.ReportCheckpoint", target); !s.ok()) {
    return Refuse(ctx, s);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  core_->ReportCheckpoint(req->job_id(), req->step(), 0,
                          [reactor](absl::Status s) { reactor->Finish(ToGrpc(s)); });
  return reactor;
}

}  // namespace athanor::coord
