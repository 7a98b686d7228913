// NotebookProxy: the coordinator's HTTPS front for notebooks
// (docs/operations.md, "Notebooks"; docs/security.md). It listens on
// --notebook-listen with the coordinator's certificate, apart from the
// dashboard (civetweb cannot hand a raw connection over for WebSockets), and
// serves:
//   GET  /notebook-login          a form asking for the tenant's token;
//   POST /notebook-login          the bearer token (`Authorization: Bearer`, or
//                                 the form's `token` field; never the URL):
//                                 sets a session cookie (HttpOnly, Secure,
//                                 SameSite=Strict, Path=/notebook/) and
//                                 redirects to `next` (a /notebook/ path);
//   ANY  /notebook/<job>/...      with a session whose tenant owns the job
//                                 (admins: any), a running notebook job: the
//                                 request (HTTP or a WebSocket upgrade) is
//                                 relayed to rank 0's notebook server through
//                                 AgentInteractive.Tunnel on its node.
// Everything else is 404; a missing or expired session 401 (with the login
// form), another tenant's job 403, a job that is no running notebook 404 or
// 409. The session cookie and any Authorization header are removed from what
// is relayed; the agent adds the notebook server's own token.
//
// One HTTP request per tunnel (`Connection: close` unless a WebSocket
// upgrade). Heads are bounded (kMaxHeadBytes), login bodies too, and so is
// the number of open connections (Options::max_connections: more are closed
// at once). Connections that send nothing for kIdleHeadS are closed before
// their head; a relayed connection lasts as long as both ends keep it.
//
// Thread model: an acceptor thread; each connection gets a thread running
// its own io_context (TLS and the HTTP head as coroutines), plus a thread
// reading the tunnel's stream from the agent. The destructor stops all of
// them and waits. The core, the authenticator's state and the agents' TLS
// material are not owned and outlive the proxy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http_server.h"
#include "coordinator/core/coordinator_core.h"
#include "security/tls.h"

namespace athanor::coord {

struct NotebookProxyOptions {
  std::string listen;                 // HOST:PORT (PORT 0: a free one)
  security::TlsMaterial tls;          // the coordinator's certificate and key
  const security::TlsMaterial* agent_tls = nullptr;  // null: plain channels (tests only)
  HttpAuthenticator authenticator;    // the dashboard's: bearer token -> tenant, role
  CoordinatorCore* core = nullptr;
  int max_connections = 256;
  int64_t session_ttl_s = 12 * 3600;
};

class NotebookProxy {
 public:
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr size_t kMaxLoginBodyBytes = 8 * 1024;
  static constexpr int kIdleHeadS = 30;

  // Listens; InvalidArgument / Unavailable naming the address when it cannot.
  static absl::StatusOr<std::unique_ptr<NotebookProxy>> Start(NotebookProxyOptions options);
  ~NotebookProxy();
  int port() const;

  class Impl;

 private:
  explicit NotebookProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace athanor::coord
