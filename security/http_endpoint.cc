#include "security/http_endpoint.h"

#include "absl/strings/str_cat.h"

namespace athanor::security {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& listen, const TlsMaterial* tls, HttpServer::Options http,
    const std::function<void(HttpServer&)>& routes) {
  if (tls != nullptr && (tls->cert_pem.empty() || tls->key_pem.empty())) {
    return absl::InvalidArgumentError("HTTPS needs the daemon's certificate and key");
  }
  std::unique_ptr<HttpEndpoint> e(new HttpEndpoint());
  http.listen = tls != nullptr ? "127.0.0.1:0" : listen;
  e->http_ = std::make_unique<HttpServer>(std::move(http));
  routes(*e->http_);
  if (absl::Status s = e->http_->Start(); !s.ok()) return s;
  if (tls == nullptr) return e;
  TlsFrontOptions front;
  front.listen = listen;
  front.cert_pem = tls->cert_pem;
  front.key_pem = tls->key_pem;
  front.backend_port = e->http_->port();
  absl::StatusOr<std::unique_ptr<TlsFront>> started = TlsFront::Start(std::move(front));
  if (!started.ok()) return started.status();
  e->front_ = std::move(*started);
  return e;
}

HttpEndpoint::~HttpEndpoint() {
  front_.reset();
  http_.reset();
}

}  // namespace athanor::security
