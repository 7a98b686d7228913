#include "security/tls_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace athanor::security {
namespace {

struct ClientFree {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(SSL* p) const { SSL_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
};

std::string Why(SSL* ssl) {
  unsigned long e = ERR_get_error();
  char buf[256] = "";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  std::string out = buf;
  if (ssl != nullptr && SSL_get_verify_result(ssl) != X509_V_OK) {
    out += absl::StrCat(" (", X509_verify_cert_error_string(SSL_get_verify_result(ssl)), ")");
  }
  return out.empty() ? "connection closed" : out;
}

}  // namespace

absl::StatusOr<std::string> TlsExchange(const std::string& address, const std::string& ca_pem,
                                        const std::string& server_name, const std::string& request,
                                        std::chrono::milliseconds timeout) {
  size_t colon = address.rfind(':');
  int port = 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 ||
      port > 65535 || inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError("expected IPv4 HOST:PORT, got '" + address + "'");
  }
  sa.sin_port = htons(static_cast<uint16_t>(port));
  std::unique_ptr<SSL_CTX, ClientFree> ctx(SSL_CTX_new(TLS_client_method()));
  std::unique_ptr<BIO, ClientFree> bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  std::unique_ptr<X509, ClientFree> ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!ctx || !ca || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca.get()) != 1) {
    return absl::InvalidArgumentError("the CA certificate is not PEM: " + Why(nullptr));
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket: " + std::string(strerror(errno)));
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return absl::UnavailableError("cannot connect to " + address + ": " + why);
  }
  std::unique_ptr<SSL, ClientFree> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  SSL_set_tlsext_host_name(ssl.get(), server_name.c_str());
  SSL_set1_host(ssl.get(), server_name.c_str());
  if (SSL_connect(ssl.get()) != 1) {
    std::string why = Why(ssl.get());
    close(fd);
    return absl::UnavailableError("TLS handshake with " + address + " failed: " + why);
  }
  std::string out;
  bool ok = SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())) == static_cast<int>(request.size());
  char buf[16384];
  int n = 0;
  while (ok && (n = SSL_read(ssl.get(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  const bool clean = ok && SSL_get_error(ssl.get(), n) == SSL_ERROR_ZERO_RETURN;
  const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
  ERR_clear_error();
  close(fd);
  if (!clean && timed_out) return absl::DeadlineExceededError("no answer from " + address);
  if (!ok) return absl::UnavailableError("cannot send to " + address);
  return out;
}

}  // namespace athanor::security
