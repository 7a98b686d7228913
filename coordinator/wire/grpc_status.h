// absl::Status <-> grpc::Status at the RPC edges. Canonical codes map 1:1.
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace athanor::coord {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace athanor::coord
