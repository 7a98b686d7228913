#include "checkpoint/service/stage_request.h"

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::ckptsvc {
namespace {

bool ValidJobName(const std::string& job) {
  if (job.empty() || job.size() > 128 || job == "." || job == "..") return false;
  for (char c : job) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<int64_t> IntField(const nlohmann::json& msg, const char* name, int64_t lo,
                                 int64_t hi) {
  auto it = msg.find(name);
  if (it == msg.end() || !it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("field '", name, "' must be an integer"));
  }
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", name, "' = ", v, " is outside [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<std::string> StringField(const nlohmann::json& msg, const char* name,
                                        size_t max_len) {
  auto it = msg.find(name);
  if (it == msg.end() || !it->is_string() || it->get<std::string>().size() > max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", name, "' must be a string of at most ", max_len, " bytes"));
  }
  return it->get<std::string>();
}

}  // namespace

absl::StatusOr<StageRequest> ParseStageRequest(const nlohmann::json& msg, uint64_t budget) {
  StageRequest r;
  ASSIGN_OR_RETURN(r.job, StringField(msg, "job", 128));
  if (!ValidJobName(r.job)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid job id '", r.job, "'"));
  }
  ASSIGN_OR_RETURN(r.uri, StringField(msg, "uri", 4096));
  if (r.uri.empty()) return absl::InvalidArgumentError("field 'uri' is empty");
  ASSIGN_OR_RETURN(int64_t attempt, IntField(msg, "attempt", 0, INT32_MAX));
  ASSIGN_OR_RETURN(int64_t world, IntField(msg, "world_size", 1, 99999));
  ASSIGN_OR_RETURN(int64_t rank, IntField(msg, "rank", 0, world - 1));
  ASSIGN_OR_RETURN(int64_t keep, IntField(msg, "keep_last", 0, 1000000));
  ASSIGN_OR_RETURN(r.step, IntField(msg, "step", 0, 9999999999));
  ASSIGN_OR_RETURN(int64_t bytes, IntField(msg, "bytes", 1, INT64_MAX));
  if (static_cast<uint64_t>(bytes) > budget) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ", bytes, "-byte shard can never fit the node's ", budget, "-byte staging budget"));
  }
  r.attempt = static_cast<int32_t>(attempt);
  r.world_size = static_cast<int32_t>(world);
  r.rank = static_cast<int32_t>(rank);
  r.keep_last = static_cast<int32_t>(keep);
  r.bytes = static_cast<uint64_t>(bytes);
  auto wait = msg.find("wait");
  r.wait = wait == msg.end() || !wait->is_boolean() || wait->get<bool>();
  auto env = msg.find("env");
  if (env != msg.end() && env->is_object()) {
    if (env->size() > 32) return absl::InvalidArgumentError("field 'env' has more than 32 entries");
    for (auto it = env->begin(); it != env->end(); ++it) {
      if (!absl::StartsWith(it.key(), "AWS_") || !it->is_string() ||
          it->get<std::string>().size() > 4096) {
        return absl::InvalidArgumentError(
            absl::StrCat("field 'env' may hold only AWS_* strings; '", it.key(), "' is not one"));
      }
      r.env[it.key()] = it->get<std::string>();
    }
  }
  return r;
}

}  // namespace athanor::ckptsvc
