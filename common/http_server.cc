#include "common/http_server.h"

#include <civetweb.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace athanor {
namespace {

constexpr size_t kMaxQueryPairs = 32;
constexpr size_t kMaxQueryField = 4096;

std::string Decode(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() &&
               isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

void Send(mg_connection* conn, const HttpResponse& r) {
  if (!r.file_path.empty()) {
    mg_send_mime_file(conn, r.file_path.c_str(), r.content_type.c_str());
    return;
  }
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(),
            r.body.size());
  mg_write(conn, r.body.data(), r.body.size());
}

}  // namespace

HttpAuthenticator OpenAuthenticator() {
  return [](const HttpRequest&) -> absl::StatusOr<HttpCaller> {
    return HttpCaller{"", "anonymous"};
  };
}

HttpServer::HttpServer(Options options) : options_(std::move(options)) {
  if (!options_.authenticator) options_.authenticator = OpenAuthenticator();
}

HttpServer::~HttpServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

void HttpServer::Route(const std::string& prefix, HttpHandler handler) {
  routes_.emplace_back(prefix, std::move(handler));
  std::sort(routes_.begin(), routes_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::map<std::string, std::string> HttpServer::ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t pairs = 0;
  for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    if (++pairs > kMaxQueryPairs) break;
    if (part.size() > kMaxQueryField) continue;
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    out.emplace(Decode(kv.first), Decode(kv.second));
  }
  return out;
}

absl::Status HttpServer::Start() {
  static std::once_flag init;
  // Plain HTTP only: Debian's civetweb loads whatever libssl.so it finds at
  // run time and crashes on TLS connections with OpenSSL 3. HTTPS is a TLS
  // front before this server (security/http_endpoint.h).
  std::call_once(init, [] { mg_init_library(0); });
  std::string listen = options_.listen;
  std::string threads = std::to_string(std::max(1, options_.threads));
  const char* opts[] = {"listening_ports", listen.c_str(), "num_threads", threads.c_str(),
                        "enable_keep_alive", "no", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char* message) {
    ATHANOR_LOG(WARNING) << "http: " << message;
    return 1;
  };
  ctx_ = mg_start(&callbacks, this, opts);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on '", listen, "'"));
  }
  mg_set_request_handler(ctx_, "/", &HttpServer::Dispatch, this);
  mg_server_port ports[4];
  int n = mg_get_server_ports(ctx_, 4, ports);
  port_ = n > 0 ? ports[0].port : 0;
  return absl::OkStatus();
}

int HttpServer::Dispatch(mg_connection* conn, void* self) {
  const mg_request_info* info = mg_get_request_info(conn);
  HttpRequest request;
  request.method = info->request_method != nullptr ? info->request_method : "";
  request.path = info->local_uri != nullptr ? info->local_uri : "/";
  if (info->query_string != nullptr) request.query = ParseQuery(info->query_string);
  const char* auth = mg_get_header(conn, "Authorization");
  if (auth != nullptr) request.authorization = auth;
  Send(conn, static_cast<const HttpServer*>(self)->Handle(request));
  return 1;  // handled
}

HttpResponse HttpServer::Handle(HttpRequest& request) const {
  absl::StatusOr<HttpCaller> caller = options_.authenticator(request);
  if (!caller.ok()) {
    return {401, "text/plain; charset=utf-8", std::string(caller.status().message()) + "\n", ""};
  }
  request.caller = *caller;
  if (request.method != "GET" && request.method != "HEAD") {
    return {405, "text/plain; charset=utf-8", "only GET is served here\n", ""};
  }
  for (const auto& [prefix, handler] : routes_) {
    if (request.path.compare(0, prefix.size(), prefix) == 0) return handler(request);
  }
  return {404, "text/plain; charset=utf-8", absl::StrCat("no page at ", request.path.substr(0, 200), "\n"), ""};
}

}  // namespace athanor
