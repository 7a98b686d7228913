// HttpEndpoint: an HttpServer (common/http_server.h) on a public HOST:PORT,
// over TLS when the daemon has TLS material and in plaintext otherwise
// (--insecure clusters, which serve on loopback only).
//
// With TLS the HttpServer listens on 127.0.0.1 with an ephemeral port and a
// TlsFront (tls_front.h) accepts on `listen` with the daemon's certificate
// and relays to it, so every route, authenticator and handler is the same
// either way. Start() and the destructor run on the owning thread; the
// destructor stops the front first, then the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http_server.h"
#include "security/tls.h"
#include "security/tls_front.h"

namespace athanor::security {

class HttpEndpoint {
 public:
  // `http.listen` is replaced (`listen` or the loopback backend); `routes`
  // registers the handlers before the server starts. `tls` null: plaintext.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, const TlsMaterial* tls, HttpServer::Options http,
      const std::function<void(HttpServer&)>& routes);
  ~HttpEndpoint();

  // The public port (the front's under TLS).
  int port() const { return front_ ? front_->port() : http_->port(); }
  bool tls() const { return front_ != nullptr; }
  // "https" or "http", for log lines.
  const char* scheme() const { return tls() ? "https" : "http"; }

 private:
  HttpEndpoint() = default;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<TlsFront> front_;
};

}  // namespace athanor::security
