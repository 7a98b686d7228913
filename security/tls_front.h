// TlsFront: HTTPS in front of a plaintext HTTP server on loopback.
//
// The HTTP servers (civetweb: /metrics and the dashboard) listen on
// 127.0.0.1 with an ephemeral port; a TlsFront accepts TLS (1.2 or newer,
// OpenSSL) on the public address with the daemon's certificate (the
// coordinator's or the agent's, from the cluster CA), and relays the bytes of
// each connection to the backend and back. Clients verify the certificate
// against the cluster CA and the name in it (kCoordinatorName, AgentName()).
//
// Bounds: at most `max_connections` connections at once (more are closed on
// accept); a handshake must finish within `handshake_timeout`; a connection
// idle (no byte either way) for `idle_timeout` is closed. A peer that is not
// speaking TLS (plain HTTP, garbage) fails its handshake and is closed; the
// front keeps serving.
//
// Threads: one acceptor, plus one thread per open connection (bounded as
// above; the acceptor joins finished ones). Start() and the destructor are
// called from the owning thread; the destructor stops accepting, ends every
// open connection and joins their threads. Start() sets SIGPIPE to ignored if it was at its default (a peer
// closing mid-write must be an error, not the daemon's death).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct ssl_ctx_st;

namespace athanor::security {

struct TlsFrontOptions {
  std::string listen;     // HOST:PORT; PORT 0 picks a free one
  std::string cert_pem;   // the server's certificate
  std::string key_pem;    // and its private key
  int backend_port = 0;   // the plaintext server on 127.0.0.1
  int max_connections = 64;
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
};

struct TlsFrontStats {
  int64_t accepted = 0;           // connections that completed a handshake
  int64_t handshake_failures = 0; // not TLS, bad TLS, or too slow
  int64_t over_limit = 0;         // closed because max_connections were open
  int64_t open = 0;               // connections open now
};

class TlsFront {
 public:
  // Listens and starts accepting. InvalidArgument for unusable certificate
  // material, Unavailable naming the address when it cannot listen.
  static absl::StatusOr<std::unique_ptr<TlsFront>> Start(TlsFrontOptions options);
  ~TlsFront();

  int port() const { return port_; }
  TlsFrontStats stats() const;

 private:
  struct Conn {
    int client = -1;
    int backend = -1;
  };
  explicit TlsFront(TlsFrontOptions options) : options_(std::move(options)) {}
  void AcceptLoop();
  void Reap();  // joins the threads of connections that ended
  void Serve(int64_t id, int fd);
  bool Handshake(void* ssl, int fd);
  void Relay(void* ssl, int client, int backend);
  int ConnectBackend();

  const TlsFrontOptions options_;
  ssl_ctx_st* ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Open connections' sockets, so that stopping can shut them down; a
  // connection's thread removes its entry before closing them.
  std::map<int64_t, Conn> open_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> finished_ ABSL_GUARDED_BY(mu_);  // ids whose thread is ending
  TlsFrontStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::security
