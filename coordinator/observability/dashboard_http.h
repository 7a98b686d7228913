// The coordinator's HTTP endpoint: Prometheus /metrics, the web dashboard
// (/, /job?id=N, /billing?tenant=T&month=YYYY-MM, /static/...) and its JSON API:
//   /api/cluster           the published cluster view (as `athanor top` gets it)
//   /api/telemetry?job=N   a job's downsampled training history
//   /api/job?id=N          the job as `athanor job` gets it (attempts with
//                          their spans and outcomes)
//   /api/logs?job=N&bytes=B  the newest attempt's log tails, as `athanor logs`
//   /api/bill?tenant=T&month=YYYY-MM  a tenant's bill (both optional: the
//                          caller's own, this month)
//   /api/balances          every tenant's balance for an admin, a user's own
// /api/cluster, /api/telemetry and /metrics come from what CoordinatorMetrics
// published: those handlers take no coordinator lock. /api/job, /api/logs,
// /api/bill and /api/balances are the CLI's RPCs (DashboardRpc), made with
// the caller's token, so the RPC layer authorises them (a refusal is an HTTP
// 403 with its message). Chart.js is served from the Debian package's
// folder (libjs-chart.js). Authentication: HttpServer's authenticator hook.
// Served over HTTPS with the coordinator's certificate when `tls` is set
// (security/http_endpoint.h). The metrics object is not owned and must
// outlive the server.
#pragma once

#include <memory>
#include <string>

#include "common/http_server.h"
#include "coordinator/observability/metrics_registry.h"
#include "security/http_endpoint.h"

namespace athanor::coord {

struct DashboardOptions {
  std::string listen;                                  // HOST:PORT
  std::string chartjs_dir = "/usr/share/javascript/chart.js";
  HttpAuthenticator authenticator;                     // null: open
  const security::TlsMaterial* tls = nullptr;          // null: plaintext (--insecure)
  std::string grpc_target;                             // the coordinator's own HOST:PORT
  std::string grpc_ca_pem;                             // empty: plaintext gRPC (--insecure)
  int notebook_port = 0;  // --notebook-listen's port (0: none): instances link to their notebooks
};

absl::StatusOr<std::unique_ptr<security::HttpEndpoint>> StartDashboard(const DashboardOptions& options,
                                                                      CoordinatorMetrics* metrics);

}  // namespace athanor::coord
