// Dialling a coordinator, or a list of them (coordinator_targets.h): the
// target and the channel arguments that go with it. Header-only, so that
// athanor_common itself needs no gRPC; its callers link gRPC anyway.
#pragma once

#include <string>

#include <grpcpp/support/channel_arguments.h>

#include "absl/status/statusor.h"
#include "common/coordinator_targets.h"

namespace athanor {

// The target to dial for `list`, with `args` given the service config a list
// needs. An error where the list does not parse or
// resolve; `args` is then untouched.
inline absl::StatusOr<std::string> CoordinatorDialTarget(const std::string& list, grpc::ChannelArguments* args) {
  absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor(list);
  if (!t.ok()) return t.status();
  if (!t->service_config.empty()) args->SetServiceConfigJSON(t->service_config);
  return t->target;
}

}  // namespace athanor
