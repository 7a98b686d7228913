// CommandAccess: whether a rank may run a command that its sandbox hides.
//
// A rank's sandbox masks /root, /home, /run and /tmp (sandbox.h), so a
// training binary built in a clone under one of them would not be found. The
// rule: a rank may run the command it was asked to run when its tenant may run
// it on the host. The agent checks that as the tenant's uid (every parent
// folder searchable, the file readable and executable), and for a script the
// same of its `#!` interpreter, then shows just those files to the sandbox,
// read-only, at their own paths. Nothing else of their folders is shown, and
// nothing under the agent's work dir or an operator's --sandbox-hide path is
// ever shown.
//
// Thread model: stateless functions; CanExecuteAs forks (the child only makes
// system calls), so it is safe from a multi-threaded agent.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::agent {

// True when `uid`/`gid` (with no supplementary groups) can read and execute
// `path` on the host, through every parent folder. Errors only when the check
// itself cannot run.
absl::StatusOr<bool> CanExecuteAs(uid_t uid, gid_t gid, const std::string& path);

// The interpreter named by the `#!` line of the file at `path`, or "" when it
// has none (an ELF binary, say) or cannot be read.
std::string ScriptInterpreter(const std::string& path);

// What a sandbox that mounts `mounts` (Wrap's "KIND:SRC:DST" list) must add so
// that `command` runs as `uid`: "rofile:SRC:DST" mounts (SRC the file's real
// path, DST the path the rank names), possibly none. FailedPrecondition, with
// the way out, when the command (or its interpreter) is hidden and the uid may
// not run it, or when it is hidden by a folder that is never shown
// (`never_shown`: the agent's work dir, --sandbox-hide paths).
absl::StatusOr<std::vector<std::string>> MountsToRun(const std::vector<std::string>& mounts,
                                                     const std::string& command, uid_t uid,
                                                     const std::vector<std::string>& never_shown);

}  // namespace athanor::agent
