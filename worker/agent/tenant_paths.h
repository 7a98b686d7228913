// Folders the agent makes, as root, at paths a tenant chose (a file://
// checkpoint root): made and owned without following any link, so a link a
// tenant planted cannot turn a root mkdir, chown or bind mount onto a folder
// of root's or of another tenant's.
//
// Thread model: a stateless function.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace athanor::agent {

// Makes `path` (absolute; no "." or ".." parts) and the folders above it that
// are missing (root's, 0755), walking from "/" one part at a time with
// O_NOFOLLOW, then owns the last one by `uid` with `mode`. InvalidArgument,
// naming the part, when any part is a link or not a folder, or when `path`
// lies in or above one of `forbidden` (the agent's work dir, hidden paths).
absl::Status MakeTenantDir(const std::string& path, uid_t uid, mode_t mode,
                           const std::vector<std::string>& forbidden);

}  // namespace athanor::agent
