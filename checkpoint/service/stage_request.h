// A rank's "stage" request to the node checkpoint service (wire.h), checked
// field by field: the job id is a safe file name, every number lies in its
// range (rank < world size <= 99999, 1 <= bytes <= the node's staging
// budget), the URI is a bounded non-empty string, and `env` holds at most 32
// AWS_* strings. Pure; thread-safe. Fuzzed by fuzz/fuzz_ckptsvc_wire.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace athanor::ckptsvc {

struct StageRequest {
  std::string job, uri;
  int32_t attempt = 0, rank = 0, world_size = 0, keep_last = 0;
  int64_t step = 0;
  uint64_t bytes = 0;
  bool wait = true;                        // false: answer "skip" instead of waiting
  std::map<std::string, std::string> env;  // the job's AWS_* credentials
};

// InvalidArgument naming the field; ResourceExhausted when `bytes` can never
// fit `budget`.
absl::StatusOr<StageRequest> ParseStageRequest(const nlohmann::json& msg, uint64_t budget);

}  // namespace athanor::ckptsvc
