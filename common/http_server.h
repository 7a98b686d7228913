// HttpServer: a small HTTP/1.1 server (civetweb) for read-only views:
// Prometheus /metrics, the dashboard's pages and its JSON API.
//
// Routes map a path prefix to a handler; the longest prefix wins. Every
// request first goes through the Authenticator: the open default admits
// everyone, and a deployment with tokens passes one that checks the bearer
// token (RFC 6750 `Authorization: Bearer ...`) and names the caller's tenant
// and role, which handlers see in HttpRequest::caller. A refused request is
// answered 401 with the authenticator's message, before any handler runs.
//
// Thread model: handlers run on civetweb's worker threads (`threads` of
// them), concurrently; they must be thread-safe and must not block for long.
// Start() and the destructor are called from the owning thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace athanor {

struct HttpCaller {
  std::string tenant;  // empty: not bound to a tenant (open server, or an admin)
  std::string role;    // "admin", "user", or "anonymous" on an open server
};

struct HttpRequest {
  std::string method;
  std::string path;    // without the query string, e.g. /api/jobs/3
  std::map<std::string, std::string> query;  // decoded; the first of repeated names wins
  std::string authorization;  // the Authorization header, verbatim ("" when absent)
  HttpCaller caller;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // A file to send instead of `body` (static assets); empty: none.
  std::string file_path;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Returns the caller, or an error (answered 401 with its message).
using HttpAuthenticator = std::function<absl::StatusOr<HttpCaller>(const HttpRequest&)>;

// Admits every request as an anonymous caller.
HttpAuthenticator OpenAuthenticator();

class HttpServer {
 public:
  struct Options {
    std::string listen;  // HOST:PORT; PORT 0 picks a free one
    int threads = 2;
    HttpAuthenticator authenticator;  // null: OpenAuthenticator()
  };
  explicit HttpServer(Options options);
  ~HttpServer();  // stops serving; waits for running handlers

  // Before Start() only.
  void Route(const std::string& prefix, HttpHandler handler);
  // Listens; Unavailable naming the address when it cannot.
  absl::Status Start();
  int port() const { return port_; }

  // Parses "a=1&b=x%20y" (bounded: at most 32 pairs, 4 KiB each).
  static std::map<std::string, std::string> ParseQuery(const std::string& query);

 private:
  static int Dispatch(mg_connection* conn, void* self);
  HttpResponse Handle(HttpRequest& request) const;

  Options options_;
  std::vector<std::pair<std::string, HttpHandler>> routes_;  // constant once started
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace athanor
