// A TCP key-value store for bootstrap, like torchrun's TCPStore.
//
// TcpStoreServer runs on rank 0 (one thread, poll() over all clients) and
// holds keys in memory until it is destroyed. TcpStoreClient talks to it:
// Set, Get (waits until the key exists, up to a deadline), Add (atomic int64
// add, returns the new value), Check (non-blocking existence).
//
// Rendezvous secret: a server given a non-empty secret requires every client
// to present it in its first message (op 'H'); a client that sends anything
// else, or another secret, is disconnected before any key is read or set.
// A client given a secret presents it on connecting and fails with
// PermissionDenied when the server hangs up on it. By default both take the
// secret from ATHANOR_RENDEZVOUS_SECRET (the agent sets it per attempt; see
// docs/security.md); without it they behave as before.
//
// Threading: both classes are thread-safe (the client serialises calls with a
// mutex). Errors: Unavailable when the server cannot be reached or the
// connection breaks; DeadlineExceeded when a Get or the connect outlives its
// timeout (the message names the key; a timed-out Get is withdrawn, so the
// connection stays usable); FailedPrecondition for an Add on a value that is
// not an 8-byte counter. The server caps key and value sizes and disconnects
// a peer that breaks the wire format (see store_protocol.h); a client whose
// server sends a malformed reply drops the connection (Unavailable after).
// Hosts are IPv4 literals or names that resolve to IPv4.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace athanor {

// ATHANOR_RENDEZVOUS_SECRET, or "" when unset.
std::string RendezvousSecretFromEnv();

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 picks one; see port()).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const std::string& host, int port, const std::string& secret = RendezvousSecretFromEnv());
  ~TcpStoreServer();  // stops the thread and closes every connection
  int port() const { return port_; }
  // Stops accepting connections and blocks until every client has hung up
  // or `grace` passed, so that ranks still reading (say, to learn which rank
  // never joined) are not cut off by rank 0 leaving first.
  void Drain(std::chrono::milliseconds grace);

 private:
  TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write, std::string secret);
  void Run();

  const int listen_fd_;
  const int port_;
  const int wake_read_, wake_write_;
  const std::string secret_;  // empty: every client is served
  std::atomic<int64_t> grace_ms_{0};  // set by Drain() before the wake-up byte
  std::thread thread_;
};

class TcpStoreClient {
 public:
  // Connects, retrying until `timeout` passes (the server may start later).
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const std::string& host, int port, std::chrono::milliseconds timeout,
      const std::string& secret = RendezvousSecretFromEnv());
  ~TcpStoreClient();

  absl::Status Set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  absl::StatusOr<bool> Check(const std::string& key);

 private:
  TcpStoreClient(int fd, std::string host, int port)
      : host_(std::move(host)), port_(port), fd_(fd) {}
  absl::StatusOr<std::string> Call(char op, const std::string& key, const std::string& value,
                                   std::chrono::milliseconds timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads one message into (op, value); DeadlineExceeded / Unavailable. Needs mu_.
  absl::Status ReadReply(std::chrono::steady_clock::time_point deadline, char* op,
                         std::string* value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
