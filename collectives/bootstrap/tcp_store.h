// A TCP key-value store for bootstrap, like torchrun's TCPStore.
//
// TcpStoreServer runs on rank 0 (one thread, poll() over all clients) and
// holds keys in memory until it is destroyed. TcpStoreClient talks to it:
// Set, Get (waits until the key exists, up to a deadline), Add (atomic int64
// add, returns the new value), Check (non-blocking existence).
//
// Rendezvous secret: a server given a non-empty secret and each client given
// one prove to each other that they know it, with an HMAC challenge and
// response in both directions, and never send it (store_auth.h). The server
// proves first: a client that meets a listener that cannot prove the secret
// (another tenant's process squatting on the port, a store of another
// attempt, a store without a secret) fails with PermissionDenied naming the
// address and has sent it nothing derived from the secret. The server refuses
// a client that does not prove the secret (or has none) before any key is
// read or set, hangs up, and records why (Refusals()). Both take the secret
// as an option; when neither has one (athanor-run, unsandboxed agents) the
// wire is as it always was.
//
// Listening socket: under an agent, rank 0 does not bind MASTER_PORT itself.
// The agent binds it (binding is its check that no other process, say
// another tenant's squatter, holds the port) and passes the listening socket
// down (StoreServerOptions::listen_fd); the server serves on a duplicate of
// it, so the port is never free between the agent's check and the store.
//
// Threading: both classes are thread-safe (the client serialises calls with a
// mutex). Errors: Unavailable when the server cannot be reached or the
// connection breaks, and for a client without a secret refused by a server
// with one (the message says so); DeadlineExceeded when a Get or the connect
// outlives its timeout (the message names the key; a timed-out Get is
// withdrawn, so the connection stays usable), or a listener does not answer
// the secret's challenge within min(timeout, 10 s); FailedPrecondition for an
// Add on a value that is not an 8-byte counter. The server caps key and value sizes and disconnects
// a peer that breaks the wire format (see store_protocol.h); a client whose
// server sends a malformed reply drops the connection (Unavailable after).
// Hosts are IPv4 literals or names that resolve to IPv4.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "collectives/bootstrap/store_protocol.h"

namespace athanor {

struct StoreServerOptions {
  std::string secret;  // empty: every client is served
  // >= 0: a TCP socket already bound and listening (the agent's), which the
  // server serves on instead of binding host:port; the caller keeps this
  // descriptor (the server duplicates it and marks the original close-on-exec).
  int listen_fd = -1;
};

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks one; see port()). Unavailable, saying
  // that another process (possibly another tenant's) holds the port, when
  // host:port is already in use. With options.listen_fd: InvalidArgument
  // when it is not a listening IPv4 TCP socket, or is bound to another port
  // than a non-zero `port`.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               const StoreServerOptions& options);
  ~TcpStoreServer();  // stops the thread and closes every connection
  int port() const { return port_; }
  // Stops accepting connections and blocks until every client has hung up
  // or `grace` passed, so that ranks still reading (say, to learn which rank
  // never joined) are not cut off by rank 0 leaving first.
  void Drain(std::chrono::milliseconds grace);
  // Why peers were refused (one line each, naming the peer's address), oldest
  // first, the last kMaxRefusals of them. Blocks until there are at least
  // `at_least` or `timeout` passed. Thread-safe.
  std::vector<std::string> Refusals(size_t at_least, std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(refusals_mu_);

  static constexpr size_t kMaxRefusals = 64;

 private:
  TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write, std::string secret);
  // Serves on `listen_fd` (owned from here on, listening already).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Serve(int listen_fd, const std::string& secret);
  void Run();
  // Records a refusal for Refusals() and logs it (the first 16, then one in
  // 256, so that a peer that keeps knocking cannot flood the log).
  void Refused(const std::string& peer, const std::string& why) ABSL_LOCKS_EXCLUDED(refusals_mu_);

  const int listen_fd_;
  const int port_;
  const int wake_read_, wake_write_;
  const std::string secret_;  // empty: every client is served
  std::atomic<int64_t> grace_ms_{0};  // set by Drain() before the wake-up byte
  std::thread thread_;
  absl::Mutex refusals_mu_;
  std::deque<std::string> refusals_ ABSL_GUARDED_BY(refusals_mu_);
  uint64_t refusal_count_ ABSL_GUARDED_BY(refusals_mu_) = 0;  // all of them, not only the kept
};

class TcpStoreClient {
 public:
  // Connects, retrying until `timeout` passes (the server may start later),
  // and proves `secret` (empty: none).
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                                 std::chrono::milliseconds timeout,
                                                                 const std::string& secret);
  ~TcpStoreClient();

  absl::Status Set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  absl::StatusOr<bool> Check(const std::string& key);

 private:
  TcpStoreClient(int fd, std::string host, int port)
      : host_(std::move(host)), port_(port), fd_(fd) {}
  // The mutual proof of `secret` (store_auth.h), within `timeout`.
  absl::Status Authenticate(const std::string& secret, std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Call(char op, const std::string& key, const std::string& value,
                                   std::chrono::milliseconds timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads one message into `frame`; DeadlineExceeded / Unavailable. A reply
  // whose frame would pass `max_bytes` is malformed (the handshake expects a
  // small one from a listener it does not trust yet).
  absl::Status ReadReply(std::chrono::steady_clock::time_point deadline, store_protocol::Frame* frame,
                         size_t max_bytes = store_protocol::kHeaderBytes + store_protocol::kMaxKeyBytes +
                                            store_protocol::kMaxValueBytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Address() const;  // "host:port"
  // Closes the connection for good (after a timeout or a malformed reply).
  void Break() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string host_;
  const int port_;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);            // -1 once broken
  std::string inbox_ ABSL_GUARDED_BY(mu_);  // bytes read but not yet decoded
};

// Every rank publishes `value` under "<prefix>/<rank>" and reads everyone's.
// DeadlineExceeded naming every rank whose key is missing at the deadline.
absl::StatusOr<std::vector<std::string>> AllGatherThroughStore(TcpStoreClient* store,
                                                               const std::string& prefix,
                                                               int rank, int world_size,
                                                               const std::string& value,
                                                               std::chrono::milliseconds timeout);

}  // namespace athanor
