#include "coordinator/observability/dashboard_http.h"

#include <filesystem>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/observability/dashboard_assets.h"
#include "coordinator/observability/dashboard_rpc.h"
#include "coordinator/observability/observability_service.h"

namespace athanor::coord {
namespace {

HttpResponse Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  opts.preserve_proto_field_names = true;
  HttpResponse r;
  r.content_type = "application/json";
  if (!google::protobuf::util::MessageToJsonString(m, &r.body, opts).ok()) {
    return {500, "text/plain; charset=utf-8", "cannot encode the answer as JSON\n", ""};
  }
  return r;
}

HttpResponse Text(int status, const std::string& body) {
  return {status, "text/plain; charset=utf-8", body + "\n", ""};
}

// gRPC codes as HTTP statuses, for the RPC-backed routes.
HttpResponse RpcError(const absl::Status& s) {
  int status = 502;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument: status = 400; break;
    case absl::StatusCode::kUnauthenticated: status = 401; break;
    case absl::StatusCode::kPermissionDenied: status = 403; break;
    case absl::StatusCode::kNotFound: status = 404; break;
    case absl::StatusCode::kFailedPrecondition: status = 409; break;
    default: break;
  }
  return Text(status, std::string(s.message().substr(0, 1024)));
}

// A query parameter, empty when absent.
std::string Param(const HttpRequest& req, const std::string& name) {
  auto it = req.query.find(name);
  return it == req.query.end() ? std::string() : it->second;
}

HttpResponse Asset(std::string_view name, const char* type) {
  std::string_view body = DashboardAsset(name);
  if (body.empty()) return {404, "text/plain; charset=utf-8", "missing asset\n", ""};
  return {200, type, std::string(body), ""};
}

}  // namespace

namespace {

void AddRoutes(HttpServer* server, const DashboardOptions& options, CoordinatorMetrics* metrics) {
  auto rpc = std::make_shared<DashboardRpc>(options.grpc_target, options.grpc_ca_pem);
  server->Route("/api/job", [rpc](const HttpRequest& req) {
    auto id = req.query.find("id");
    if (id == req.query.end() || id->second.empty()) return Text(400, "id: missing");
    absl::StatusOr<rpc::Job> job = rpc->GetJob(req.authorization, id->second);
    if (!job.ok()) return RpcError(job.status());
    return Json(*job);
  });
  // The caller's interactive instances (the jobs page's "Instances"), and
  // where their notebooks are served.
  server->Route("/api/instances", [rpc, port = options.notebook_port](const HttpRequest& req) {
    absl::StatusOr<rpc::ListJobsResponse> jobs = rpc->ListJobs(req.authorization);
    if (!jobs.ok()) return RpcError(jobs.status());
    rpc::ListJobsResponse instances;
    for (const rpc::Job& j : jobs->jobs()) {
      if (j.spec().interactive()) *instances.add_jobs() = j;
    }
    HttpResponse r = Json(instances);  // {"jobs": [...]}
    if (r.status == 200) r.body = absl::StrCat("{\"notebook_port\":", port, ",", r.body.substr(1));
    return r;
  });
  server->Route("/api/logs", [rpc](const HttpRequest& req) {
    auto id = req.query.find("job");
    if (id == req.query.end() || id->second.empty()) return Text(400, "job: missing");
    int bytes = 8192;
    auto b = req.query.find("bytes");
    if (b != req.query.end() && !absl::SimpleAtoi(b->second, &bytes)) return Text(400, "bytes: not a number");
    absl::StatusOr<nlohmann::json> tail = rpc->LogTail(req.authorization, id->second, bytes);
    if (!tail.ok()) return RpcError(tail.status());
    return HttpResponse{200, "application/json",
                        tail->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), ""};
  });
  server->Route("/api/bill", [rpc](const HttpRequest& req) {
    absl::StatusOr<billing::Bill> bill = rpc->GetBill(req.authorization, Param(req, "tenant"), Param(req, "month"));
    if (!bill.ok()) return RpcError(bill.status());
    return Json(*bill);
  });
  server->Route("/api/balances", [rpc](const HttpRequest& req) {
    absl::StatusOr<rpc::ListBalancesResponse> balances = rpc->ListBalances(req.authorization);
    if (!balances.ok()) return RpcError(balances.status());
    return Json(*balances);
  });
  // Metrics name every tenant's jobs: admins (or an open server) only.
  server->Route("/metrics", [metrics](const HttpRequest& req) {
    if (req.caller.role == "user") {
      return HttpResponse{403, "text/plain; charset=utf-8", "/metrics is for admins' tokens\n", ""};
    }
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics->Scrape(), ""};
  });
  server->Route("/api/cluster", [metrics](const HttpRequest& req) {
    return Json(ViewFor(metrics->View()->view, req.caller.tenant));
  });
  server->Route("/api/telemetry", [metrics](const HttpRequest& req) {
    auto it = req.query.find("job");
    if (it != req.query.end() && !JobVisible(metrics->View()->view, req.caller.tenant, it->second)) {
      return HttpResponse{403, "text/plain; charset=utf-8", "job: not the caller's tenant's\n", ""};
    }
    absl::StatusOr<rpc::JobTelemetryHistory> h =
        JobHistory(*metrics->telemetry(), it == req.query.end() ? "" : it->second);
    if (!h.ok()) return HttpResponse{400, "text/plain; charset=utf-8", absl::StrCat("job: ", h.status().message(), "\n"), ""};
    return Json(*h);
  });
  const std::string chartjs = options.chartjs_dir + "/chart.min.js";
  server->Route("/static/chart.js", [chartjs](const HttpRequest&) {
    if (!std::filesystem::exists(chartjs)) {
      return HttpResponse{404, "text/plain; charset=utf-8", "Chart.js is not installed (" + chartjs + ")\n", ""};
    }
    HttpResponse r;
    r.content_type = "application/javascript";
    r.file_path = chartjs;
    return r;
  });
  server->Route("/static/dashboard.js", [](const HttpRequest&) {
    return Asset("dashboard.js", "application/javascript");
  });
  server->Route("/static/billing.js", [](const HttpRequest&) {
    return Asset("billing.js", "application/javascript");
  });
  server->Route("/static/style.css", [](const HttpRequest&) { return Asset("style.css", "text/css"); });
  server->Route("/job", [](const HttpRequest&) { return Asset("job.html", "text/html; charset=utf-8"); });
  server->Route("/billing", [](const HttpRequest&) { return Asset("billing.html", "text/html; charset=utf-8"); });
  server->Route("/", [](const HttpRequest& req) {
    if (req.path != "/" && req.path != "/index.html") {
      return HttpResponse{404, "text/plain; charset=utf-8", "no page here\n", ""};
    }
    return Asset("index.html", "text/html; charset=utf-8");
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<security::HttpEndpoint>> StartDashboard(const DashboardOptions& options,
                                                                      CoordinatorMetrics* metrics) {
  HttpServer::Options http;
  http.threads = 4;
  http.authenticator = options.authenticator;
  return security::HttpEndpoint::Start(options.listen, options.tls, std::move(http),
                                       [&](HttpServer& server) { AddRoutes(&server, options, metrics); });
}

}  // namespace athanor::coord
