// A submission storm: M clients, each with its own connection and one call in
// flight, submit small one-node jobs (gpus_per_node drawn from 1..8) back to
// back for a fixed time, each with a fresh idempotency key (also used as the
// job's name).
//
// Beside them one probe thread measures the floor those latencies stand on:
// a GetJob call every 5 ms with an id the coordinator rejects before touching
// its state (gRPC, the server's threads and loopback, no lock, no commit).
//
// RunSubmitStorm blocks the calling thread until every client has finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace athanor::bench {

struct SubmitStormOptions {
  std::string address;               // the coordinator, HOST:PORT
  int clients = 16;
  std::chrono::milliseconds duration{15000};
  std::string key_prefix = "bench";  // keys are PREFIX-CLIENT-SEQ
  std::string tenant = "bench";
  uint32_t seed = 1;
  std::string tls_dir;               // the coordinator's CA folder; empty: plaintext
};

struct SubmitStormResult {
  int64_t accepted = 0;              // answered OK
  int64_t duplicates = 0;            // answered with duplicate = true (fresh keys: expect 0)
  std::map<std::string, int64_t> errors;  // gRPC status code name -> count
  double elapsed_s = 0;
  std::vector<double> latency_ms;    // of accepted submissions
  std::vector<double> floor_ms;      // of the probe's rejected GetJob calls
};

SubmitStormResult RunSubmitStorm(const SubmitStormOptions& options);

}  // namespace athanor::bench
