// FaultProxy: an HTTP/1.1 proxy for tests that sits between an S3 client and
// a server on loopback and breaks a chosen fraction of requests.
//
// Each client request is read whole (headers + Content-Length body). Then a
// seeded RNG decides, at `fault_rate`, one fault among:
//   kSlowDown      answer 503 SlowDown ourselves (the server never sees it)
//   kReset         reset the connection before forwarding (RST)
//   kStall         never answer; hold the connection until the client gives up
//   kTruncate      forward, then send only half of the response and close
//   kLoseResponse  forward (the server applies it), then reset: the client
//                  must cope with a retried request that already took effect
// Otherwise the request is forwarded on a fresh upstream connection
// ("Connection: close") and the response relayed whole.
//
// Threads: one acceptor plus one per client connection, all joined by Stop()
// (or the destructor), which also releases stalled connections.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::testing_s3 {

enum class Fault { kNone, kSlowDown, kReset, kStall, kTruncate, kLoseResponse };

struct FaultProxyOptions {
  int upstream_port = 0;
  double fault_rate = 0.2;
  uint64_t seed = 1;
  std::vector<Fault> faults = {Fault::kSlowDown, Fault::kReset, Fault::kStall, Fault::kTruncate,
                               Fault::kLoseResponse};
};

class FaultProxy {
 public:
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(FaultProxyOptions options);
  ~FaultProxy();
  void Stop();

  int port() const { return port_; }
  int64_t requests() const { return requests_.load(); }
  std::map<Fault, int64_t> faults_injected() const;

 private:
  explicit FaultProxy(FaultProxyOptions options) : options_(std::move(options)), rng_(options_.seed) {}
  void AcceptLoop();
  void Serve(int client);
  Fault Choose();
  // Reads until `want` is in `buf` or EOF/stop; false on EOF, error or stop.
  bool ReadMore(int fd, std::string* buf);

  const FaultProxyOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  int stop_pipe_[2] = {-1, -1};
  std::atomic<int64_t> requests_{0};
  mutable std::mutex mu_;
  std::mt19937_64 rng_;                  // guarded by mu_
  std::map<Fault, int64_t> injected_;    // guarded by mu_
  std::vector<std::thread> threads_;     // guarded by mu_
  std::thread acceptor_;
  bool stopped_ = false;
};

}  // namespace athanor::testing_s3
