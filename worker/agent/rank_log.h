// Rank logs as the agent (root) opens them: WORK_DIR/jobs/<job>/attempt-<a>/
// rank-<r>.log, reached from the work dir one folder at a time with openat
// and O_NOFOLLOW, so that a link planted in place of a log or of one of its
// folders is never followed, for writing (the rank's output, the agent's
// notices) or for reading (`athanor logs`). The work dir itself is the
// operator's and trusted. Thread model: stateless functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// An O_APPEND descriptor of `key`'s log, made (0640) with its folders (0755,
// root's) when missing. FailedPrecondition naming the path when the log or a
// folder on the way is a link or not what it should be; InvalidArgument for
// a job id that is not a safe file name. The caller closes it.
absl::StatusOr<int> OpenRankLogForAppend(const std::string& work_dir, const RankKey& key);

// A read-only descriptor of `key`'s log, a regular file. NotFound when there
// is none; FailedPrecondition when it or a folder on the way is a link or
// not a regular file / folder.
absl::StatusOr<int> OpenRankLogForRead(const std::string& work_dir, const RankKey& key);

// Appends `text` to `key`'s log as OpenRankLogForAppend opens it.
absl::Status AppendToRankLog(const std::string& work_dir, const RankKey& key, const std::string& text);

}  // namespace athanor::agent
