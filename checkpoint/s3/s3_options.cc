#include "checkpoint/s3/s3_options.h"

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/uri.h"

namespace athanor {
namespace {

template <typename T>
absl::Status ParseNumber(const std::map<std::string, std::string>& q, const char* key, T* out, T min) {
  auto it = q.find(key);
  if (it == q.end()) return absl::OkStatus();
  int64_t value = 0;
  if (!absl::SimpleAtoi(it->second, &value) || value < static_cast<int64_t>(min)) {
    return absl::InvalidArgumentError(absl::StrCat("s3 URI parameter ", key, "=", it->second,
                                                   " must be an integer >= ", min));
  }
  *out = static_cast<T>(value);
  return absl::OkStatus();
}

absl::Status ParseBool(const std::map<std::string, std::string>& q, const char* key, bool* out) {
  auto it = q.find(key);
  if (it == q.end()) return absl::OkStatus();
  if (it->second == "true" || it->second == "1") {
    *out = true;
  } else if (it->second == "false" || it->second == "0") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("s3 URI parameter ", key, "=", it->second,
                                                   " must be true or false"));
  }
  return absl::OkStatus();
}

}  // namespace

std::map<std::string, std::string> AwsEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
                           "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  return env;
}

absl::StatusOr<S3Options> ParseS3Options(const std::string& uri,
                                         const std::map<std::string, std::string>& env) {
  ASSIGN_OR_RETURN(Uri parsed, ParseUri(uri));
  if (parsed.scheme != "s3") return absl::InvalidArgumentError(absl::StrCat(uri, " is not an s3:// URI"));
  if (parsed.host.empty()) return absl::InvalidArgumentError(absl::StrCat(uri, " names no bucket"));
  S3Options o;
  o.bucket = parsed.host;
  o.prefix = parsed.path;
  while (!o.prefix.empty() && o.prefix.front() == '/') o.prefix.erase(0, 1);
  while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
  auto from_env = [&](std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names) {
      auto it = env.find(n);
      if (it != env.end() && !it->second.empty()) return it->second;
    }
    return "";
  };
  const auto& q = parsed.query;
  auto pick = [&](const char* key, std::string fallback) {
    auto it = q.find(key);
    return it != q.end() ? it->second : fallback;
  };
  o.region = pick("region", from_env({"AWS_REGION", "AWS_DEFAULT_REGION"}));
  if (o.region.empty()) o.region = "us-east-1";
  // The region becomes part of the default endpoint's host name and of every
  // signature: letters, digits and '-' only (e.g. eu-west-1).
  bool region_ok = o.region.size() <= 32;
  for (char c : o.region) region_ok = region_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (!region_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "s3 region '", absl::CHexEscape(o.region.substr(0, 64)),
        "' is not a region name (at most 32 of a-z, 0-9 and '-', e.g. eu-west-1)"));
  }
  o.endpoint = pick("endpoint", from_env({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}));
  if (o.endpoint.empty()) o.endpoint = absl::StrCat("https://s3.", o.region, ".amazonaws.com");
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  if (o.endpoint.rfind("http://", 0) != 0 && o.endpoint.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("s3 endpoint '", o.endpoint, "' must start with http:// or https://"));
  }
  o.access_key = pick("access_key", from_env({"AWS_ACCESS_KEY_ID"}));
  o.secret_key = pick("secret_key", from_env({"AWS_SECRET_ACCESS_KEY"}));
  o.session_token = pick("session_token", from_env({"AWS_SESSION_TOKEN"}));
  if (o.access_key.empty() || o.secret_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no S3 credentials for ", uri, ": set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or access_key/secret_key"));
  }
  RETURN_IF_ERROR(ParseNumber<size_t>(q, "part_size", &o.part_size, 4096));
  RETURN_IF_ERROR(ParseNumber<int>(q, "upload_threads", &o.upload_threads, 1));
  RETURN_IF_ERROR(ParseNumber<int>(q, "max_attempts", &o.max_attempts, 1));
  RETURN_IF_ERROR(ParseNumber<int>(q, "retry_base_ms", &o.retry_base_ms, 0));
  RETURN_IF_ERROR(ParseNumber<int>(q, "retry_max_ms", &o.retry_max_ms, 0));
  RETURN_IF_ERROR(ParseNumber<int>(q, "connect_timeout_ms", &o.connect_timeout_ms, 1));
  RETURN_IF_ERROR(ParseNumber<int>(q, "low_speed_seconds", &o.low_speed_seconds, 1));
  RETURN_IF_ERROR(ParseNumber<int>(q, "list_page_size", &o.list_page_size, 0));
  uint64_t max_object_mb = o.max_object_bytes >> 20;
  RETURN_IF_ERROR(ParseNumber<uint64_t>(q, "max_object_mb", &max_object_mb, 1));
  if (max_object_mb > (uint64_t{1} << 24)) {
    return absl::InvalidArgumentError("s3 max_object_mb: at most 16777216 (16 TiB)");
  }
  o.max_object_bytes = max_object_mb << 20;
  RETURN_IF_ERROR(ParseBool(q, "conditional_put", &o.conditional_put));
  RETURN_IF_ERROR(ParseBool(q, "sign_payload", &o.sign_payload));
  return o;
}

}  // namespace athanor
