// Where a notebook rank's server listens and what URL prefix it serves, as
// both the coordinator (which writes the rank's command) and the agent (which
// connects to it) see them (docs/operations.md, "Notebooks").
//
// The server listens on a unix socket in the rank's private /tmp, never on a
// TCP port: nothing but the agent (root, through /proc/<pid>/root) reaches it.
// The path stays far below the 107 bytes of sockaddr_un, even behind
// "/proc/<pid>/root" (job ids are decimal sequence numbers).
#pragma once

#include <string>

namespace athanor {

inline std::string NotebookSocketPath(const std::string& job_id) {
  return "/tmp/athanor-nb-" + job_id + ".sock";
}

// The prefix the coordinator's proxy serves the notebook under; the server
// is told it (NotebookApp.base_url) so that its links need no rewriting.
inline std::string NotebookBaseUrl(const std::string& job_id) { return "/notebook/" + job_id + "/"; }

}  // namespace athanor
