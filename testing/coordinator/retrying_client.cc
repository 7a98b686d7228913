#include "testing/coordinator/retrying_client.h"

#include "common/coordinator_targets.h"

namespace athanor::bench {

std::shared_ptr<grpc::Channel> RestartTolerantChannel(const CoordinatorProcess& coordinator,
                                                      int index) {
  grpc::ChannelArguments args;  // reconnect at once after the restart
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("athanor.test.client", index);
  args.SetMaxReceiveMessageSize(-1);
  // Calls that wait_for_ready wait until it leads: on etcd a restarted
  // coordinator is a standby until the killed one's lease runs out, and
  // answers every call at once meanwhile (coordinator/rpc/standby_server.h).
  args.SetServiceConfigJSON(LeaderServiceConfig());
  std::shared_ptr<grpc::ChannelCredentials> creds = coordinator.ChannelCredentials(&args);
  return grpc::CreateCustomChannel(coordinator.address(), creds, args);
}

bool RetryableAfterCrash(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::UNKNOWN || code == grpc::StatusCode::INTERNAL;
}

grpc::Status CallUntilAnswered(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                               int* retries, const RetryOptions& options) {
  grpc::Status s(grpc::StatusCode::UNAVAILABLE, "not called (max_attempts < 1)");
  int tries = 0;
  while (tries < options.max_attempts) {
    grpc::ClientContext ctx;
    // Waits for the restarted coordinator instead of spinning.
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + options.per_attempt);
    s = call(&ctx);
    ++tries;
    if (s.ok() || !RetryableAfterCrash(s.error_code())) break;
  }
  if (retries != nullptr) *retries = tries > 0 ? tries - 1 : 0;
  return s;
}

}  // namespace athanor::bench
