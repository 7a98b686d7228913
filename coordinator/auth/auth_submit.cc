#include "coordinator/auth/auth_submit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/uri.h"

namespace athanor::coord {
namespace {

constexpr const char* kSecretQueryKeys[] = {"access_key", "secret_key", "session_token",
                                            "x-amz-credential", "x-amz-signature",
                                            "x-amz-security-token", "password"};

}  // namespace

absl::Status CheckStoreUri(const std::string& field, const std::string& uri,
                           const std::vector<std::string>& allowed_endpoints) {
  if (uri.empty()) return absl::OkStatus();
  size_t scheme_end = uri.find("://");
  if (scheme_end != std::string::npos) {
    size_t start = scheme_end + 3;
    size_t end = uri.find_first_of("/?#", start);
    std::string authority = uri.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (authority.find('@') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": the URI carries credentials (user info before '@'); a store's credentials are "
                 "set for the tenant by an admin, never in a URI"));
    }
  }
  absl::StatusOr<Uri> parsed = ParseUri(uri);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", parsed.status().message()));
  for (const auto& [key, value] : parsed->query) {
    std::string k = absl::AsciiStrToLower(key);
    for (const char* secret : kSecretQueryKeys) {
      if (k == secret) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": the URI carries credentials (query parameter '", key,
            "'); a store's credentials are set for the tenant by an admin, never in a URI"));
      }
    }
  }
  auto endpoint = parsed->query.find("endpoint");
  if (endpoint != parsed->query.end()) {
    std::string e = endpoint->second;
    while (!e.empty() && e.back() == '/') e.pop_back();
    if (std::find(allowed_endpoints.begin(), allowed_endpoints.end(), e) == allowed_endpoints.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": endpoint '", e.substr(0, 256),
          "' is not on the coordinator's allow-list (--allow-store-endpoint)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SubmissionGuard::Admit(const Identity& who, const std::string& metadata_user,
                                    JobSpec* spec) {
  if (who.insecure) {
    if (spec->tenant.empty()) spec->tenant = metadata_user;
  } else if (spec->tenant.empty()) {
    spec->tenant = who.tenant;
  } else if (spec->tenant != who.tenant && who.role != Role::kAdmin) {
    return absl::PermissionDeniedError(absl::StrCat(
        "tenant: '", spec->tenant.substr(0, 128), "' is not the caller's tenant '", who.tenant,
        "' (a job's tenant comes from its submitter's token)"));
  }
  if (who.role == Role::kUser) {
    int32_t cap = tokens_->MaxPriority(spec->tenant);
    if (spec->priority > cap) {
      return absl::PermissionDeniedError(absl::StrCat(
          "priority: ", spec->priority, " is above tenant '", spec->tenant, "''s maximum ", cap,
          " (an admin sets it: athanor admin tenant set)"));
    }
  }
  if (absl::Status s = CheckStoreUri("checkpoint_uri", spec->checkpoint_uri, limits_.allowed_endpoints);
      !s.ok()) {
    return s;
  }
  if (who.role == Role::kUser) return TakeRateToken(who.token_id);
  return absl::OkStatus();
}

absl::Status SubmissionGuard::TakeRateToken(const std::string& key) {
  const TimePoint now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = limits_.burst;
  } else {
    b.tokens = std::min(limits_.burst, b.tokens + ToSeconds(now - b.last) * limits_.rate_per_s);
  }
  b.last = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::OkStatus();
  }
  double wait_s = limits_.rate_per_s > 0 ? (1 - b.tokens) / limits_.rate_per_s : 3600;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "submission rate limit reached (%.3g jobs/s, bursts of %.0f): retry in %.2f s",
      limits_.rate_per_s, limits_.burst, wait_s));
}

}  // namespace athanor::coord
