// Retention: keeps the newest `keep_last` committed steps of a job and sweeps
// what can never become useful.
//
//  - committed steps older than the newest `keep_last` are deleted, COMMIT
//    first (so a half-deleted step is never mistaken for a committed one);
//  - the newest committed step is never deleted (keep_last < 1 counts as 1);
//  - uncommitted steps older than the newest commit are deleted (they were
//    abandoned: at most one checkpoint is in flight and it is newer);
//  - pending uploads (S3 multipart, file temporaries) of those older steps,
//    and of any committed step (left by a crashed earlier attempt), are
//    aborted.
// Run by the committing rank after a commit. Blocks on the store.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/object_store.h"

namespace athanor {

struct RetentionOptions {
  int keep_last = 3;
};

struct RetentionReport {
  int committed_deleted = 0;
  int uncommitted_deleted = 0;
  int uploads_aborted = 0;
};

absl::StatusOr<RetentionReport> ApplyRetention(ObjectStore* store, const std::string& job,
                                               const RetentionOptions& options);

}  // namespace athanor
