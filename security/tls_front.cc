#include "security/tls_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::security {
namespace {

constexpr size_t kBuffer = 16384;

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(SSL* p) const { SSL_free(p); }
};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

absl::StatusOr<SSL_CTX*> NewContext(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, Free> cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  std::unique_ptr<X509, Free> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError("TLS front: the certificate is not PEM: " + OpenSslError());
  std::unique_ptr<BIO, Free> key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  std::unique_ptr<EVP_PKEY, Free> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError("TLS front: the private key is not PEM: " + OpenSslError());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("TLS front: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate(ctx, cert.get()) != 1 || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError("TLS front: certificate and key do not match: " + OpenSslError());
  }
  return ctx;
}

absl::StatusOr<int> Listen(const std::string& listen, int* port) {
  size_t colon = listen.rfind(':');
  int want = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &want) || want < 0 ||
      want > 65535) {
    return absl::InvalidArgumentError("TLS front: expected HOST:PORT, got '" + listen + "'");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(want);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError("TLS front: cannot resolve '" + listen + "'");
  }
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    freeaddrinfo(found);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot serve HTTPS on '", listen, "': ", strerror(err)));
  }
  freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFront>> TlsFront::Start(TlsFrontOptions options) {
  if (options.backend_port <= 0 || options.backend_port > 65535 || options.max_connections < 1) {
    return absl::InvalidArgumentError("TLS front: needs a backend port and max_connections >= 1");
  }
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<TlsFront> front(new TlsFront(std::move(options)));
  absl::StatusOr<SSL_CTX*> ctx = NewContext(front->options_.cert_pem, front->options_.key_pem);
  if (!ctx.ok()) return ctx.status();
  front->ctx_ = *ctx;
  absl::StatusOr<int> fd = Listen(front->options_.listen, &front->port_);
  if (!fd.ok()) return fd.status();
  front->listen_fd_ = *fd;
  front->acceptor_ = std::thread([f = front.get()] { f->AcceptLoop(); });
  return front;
}

TlsFront::~TlsFront() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Wakes accept() and every connection's poll or blocking read/write.
    if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
    for (auto& [id, c] : open_) {
      shutdown(c.client, SHUT_RDWR);
      if (c.backend >= 0) shutdown(c.backend, SHUT_RDWR);
    }
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::map<int64_t, std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (auto& [id, t] : threads) t.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

TlsFrontStats TlsFront::stats() const {
  absl::MutexLock lock(&mu_);
  TlsFrontStats s = stats_;
  s.open = static_cast<int64_t>(open_.size());
  return s;
}

void TlsFront::Reap() {
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t id : finished_) {
      auto it = threads_.find(id);
      if (it == threads_.end()) continue;
      done.push_back(std::move(it->second));
      threads_.erase(it);
    }
    finished_.clear();
  }
  for (std::thread& t : done) t.join();
}

void TlsFront::AcceptLoop() {
  for (;;) {
    Reap();
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (fd >= 0) close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: wait for a connection to end rather than spin.
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
      }
      continue;
    }
    if (static_cast<int>(open_.size()) >= options_.max_connections) {
      ++stats_.over_limit;
      close(fd);
      continue;
    }
    const int64_t id = next_id_++;
    open_[id] = Conn{fd, -1};
    threads_[id] = std::thread([this, id, fd] { Serve(id, fd); });
  }
}

bool TlsFront::Handshake(void* ssl_ptr, int fd) {
  SSL* ssl = static_cast<SSL*>(ssl_ptr);
  const auto deadline = std::chrono::steady_clock::now() + options_.handshake_timeout;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  bool ok = false;
  for (;;) {
    int r = SSL_accept(ssl);
    if (r == 1) {
      ok = true;
      break;
    }
    int err = SSL_get_error(ssl, r);
    short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0) break;  // not TLS, or a failed negotiation
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, events, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) break;
  }
  ERR_clear_error();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return ok;
}

int TlsFront::ConnectBackend() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(options_.backend_port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SetTimeouts(fd, options_.idle_timeout);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void TlsFront::Serve(int64_t id, int fd) {
  std::unique_ptr<SSL, Free> ssl(SSL_new(ctx_));
  int backend = -1;
  const bool shook = ssl && SSL_set_fd(ssl.get(), fd) == 1 && Handshake(ssl.get(), fd);
  if (shook) {
    SetTimeouts(fd, options_.idle_timeout);
    backend = ConnectBackend();
  }
  bool relay = false;
  {
    absl::MutexLock lock(&mu_);
    if (shook) {
      ++stats_.accepted;
    } else {
      ++stats_.handshake_failures;
    }
    if (backend >= 0) {
      open_[id].backend = backend;
      relay = !stopping_;
    }
  }
  if (relay) Relay(ssl.get(), fd, backend);
  if (shook && backend < 0) ATHANOR_LOG(WARNING) << "TLS front: cannot reach the HTTP server on port " << options_.backend_port;
  ssl.reset();
  ERR_clear_error();
  absl::MutexLock lock(&mu_);
  open_.erase(id);
  finished_.push_back(id);
  close(fd);
  if (backend >= 0) close(backend);
}

void TlsFront::Relay(void* ssl_ptr, int client, int backend) {
  SSL* ssl = static_cast<SSL*>(ssl_ptr);
  char buf[kBuffer];
  bool client_open = true;
  for (;;) {
    pollfd p[2] = {{client, static_cast<short>(client_open ? POLLIN : 0), 0}, {backend, POLLIN, 0}};
    bool client_ready = client_open && SSL_pending(ssl) > 0;
    if (!client_ready) {
      int n = poll(p, 2, static_cast<int>(options_.idle_timeout.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // idle too long, or an error
      client_ready = client_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR));
    }
    if (client_ready) {
      int n = SSL_read(ssl, buf, sizeof(buf));
      if (n > 0) {
        if (!SendAll(backend, buf, static_cast<size_t>(n))) return;
      } else {
        // The client is done sending (close_notify or EOF): let the backend
        // finish its answer.
        client_open = false;
        shutdown(backend, SHUT_WR);
        if (SSL_get_error(ssl, n) != SSL_ERROR_ZERO_RETURN) return;
      }
      continue;
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(backend, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        SSL_shutdown(ssl);  // close_notify: the answer is complete
        return;
      }
      if (SSL_write(ssl, buf, static_cast<int>(n)) != n) return;
    }
  }
}

}  // namespace athanor::security
