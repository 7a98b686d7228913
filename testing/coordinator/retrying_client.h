// Clients of a coordinator that is killed and restarted under them
// (CoordinatorProcess): channels that reconnect within a fraction of a
// second of the restart, and calls retried until answered. A retried call
// must be safe to repeat: a submission with its idempotency key, a cancel,
// a read.
//
// Thread-safe: these are free functions; a channel may be shared.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>

#include "testing/coordinator/coordinator_process.h"

namespace athanor::bench {

// A channel to `coordinator`, with its credentials (TLS + the admin token,
// or plaintext). Channels of different `index` never share a connection.
// Calls that wait_for_ready wait until it leads (its health says so).
std::shared_ptr<grpc::Channel> RestartTolerantChannel(const CoordinatorProcess& coordinator,
                                                      int index);

// Whether a call that failed with `code` may have been cut off by the
// coordinator's death (and so is worth sending again).
bool RetryableAfterCrash(grpc::StatusCode code);

struct RetryOptions {
  int max_attempts = 200;
  std::chrono::milliseconds per_attempt{5000};  // each try's deadline
};

// Runs `call` with a fresh context (wait_for_ready, the per-try deadline)
// until it returns OK or a code RetryableAfterCrash refuses, at most
// `options.max_attempts` times. Returns the last status; *retries (when
// given) is set to the number of tries after the first.
grpc::Status CallUntilAnswered(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                               int* retries = nullptr, const RetryOptions& options = {});

}  // namespace athanor::bench
