// What an identity may submit, checked before a job reaches the core:
//  - its tenant is the caller's (users: a spec naming another tenant is
//    refused; empty means the caller's own). Admins may name any tenant.
//  - its priority is at most the tenant's maximum (TokenStore::MaxPriority;
//    users only: admins set the caps).
//  - a store URI carries no credentials (user info, access_key/secret_key/
//    session_token): stores' credentials are the tenant's, set by an admin.
//  - an s3 URI's explicit endpoint is on the admin's allow-list, since the
//    coordinator itself reads every job's store (no request forgery).
//  - each token submits at most `rate_per_s` jobs a second on average, in
//    bursts of `burst` (token bucket; admins exempt); past it,
//    ResourceExhausted saying when to retry.
//  - a user's tenant has at most `max_pending` jobs pending (MaxPending; the
//    core counts them as it queues the job, ResourceExhausted past it).
// With --insecure the tenant defaults to the x-athanor-user metadata as
// before and nothing else is limited but the URI checks.
//
// Thread-safe (one mutex over the buckets). The token store and clock are not
// owned and outlive the guard.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/auth/auth_types.h"
#include "coordinator/auth/token_store.h"
#include "coordinator/model/types.h"

namespace athanor::coord {

struct SubmitLimits {
  double rate_per_s = 10;
  double burst = 50;
  int32_t max_pending = 1000;  // per tenant, for users' submissions; 0: no cap
  std::vector<std::string> allowed_endpoints;  // exact "scheme://host[:port]"
};

// InvalidArgument / PermissionDenied naming the field when `uri` carries
// credentials or an endpoint off `allowed_endpoints`. Exposed for tests.
absl::Status CheckStoreUri(const std::string& field, const std::string& uri,
                           const std::vector<std::string>& allowed_endpoints);

class SubmissionGuard {
 public:
  SubmissionGuard(const TokenStore* tokens, const Clock* clock, SubmitLimits limits)
      : tokens_(tokens), clock_(clock), limits_(std::move(limits)) {}

  // Sets spec->tenant and refuses what `who` may not submit (see above).
  // `metadata_user`: the x-athanor-user metadata (used only --insecure).
  absl::Status Admit(const Identity& who, const std::string& metadata_user, JobSpec* spec);
  // The cap on pending jobs a submission by `who` is held to (0: none):
  // users' submissions only, as for the rate limit.
  int32_t MaxPending(const Identity& who) const {
    return who.role == Role::kUser && !who.insecure ? limits_.max_pending : 0;
  }

 private:
  absl::Status TakeRateToken(const std::string& key);

  struct Bucket {
    double tokens = 0;
    TimePoint last;
  };
  const TokenStore* const tokens_;
  const Clock* const clock_;
  const SubmitLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);  // by token id
};

}  // namespace athanor::coord
