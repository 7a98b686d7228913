// Keeps a rank's work dir: packs it into a POSIX ustar archive (regular files
// and directories; symlinks and special files are skipped) and uploads it to
// an object store as <job>/workdir/rank-<r>.tar. In-process (no `tar` child,
// so the agent's reaper never races with it). Thread-safe (no shared state).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace athanor::agent {

// The archive of everything under `dir` (paths relative to it), in memory.
absl::StatusOr<std::string> TarDirectory(const std::string& dir);

// Moves `dir` aside (`<dir>.archiving`), packs it, Puts it at `key` in the
// store at `uri` (OpenObjectStore), and on success deletes it (on failure it
// goes back to `dir`): once the archive exists, `dir` no longer does.
absl::Status ArchiveAndRemove(const std::string& dir, const std::string& uri,
                              const std::string& key);

}  // namespace athanor::agent
