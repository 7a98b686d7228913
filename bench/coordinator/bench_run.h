// One measurement of athanor-bench-coordinator: a fresh coordinator process,
// a simulated fleet of `agents`, and a submission storm, all over loopback.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::bench {

struct BenchRunOptions {
  std::string coordinator_binary;
  std::string work_dir;                    // a fresh folder for the state and the log
  std::vector<std::string> coordinator_flags;
  int agents = 1000;
  int connections = 0;                     // 0: one per agent
  int register_concurrency = 64;           // RegisterNode calls in flight; 0: all at once
  int heartbeat_interval_ms = 1000;        // the coordinator's --heartbeat-interval-ms
  std::chrono::milliseconds run_time{2000};  // of each job's ranks
  int clients = 16;
  std::chrono::milliseconds warmup{3000};  // after every agent registered
  std::chrono::milliseconds duration{15000};
  std::chrono::milliseconds register_timeout{180000};
  uint32_t seed = 1;
  // Secure, as in production: a CA in work_dir/tls, mutual TLS for the fleet
  // (one certificate per agent), TLS + the admin token for the clients.
  bool tls = false;
  // Where the coordinator keeps its state: empty, SQLite in work_dir; else
  // an etcd URI (etcd://members/PREFIX), with --local-dir work_dir/local.
  std::string etcd_state;
};

struct BenchRunResult {
  int agents = 0;
  double register_s = 0;                   // until every agent had registered (or the timeout)
  int64_t registered = 0;                  // agents registered when the warm-up began
  bool fleet_complete = false;             // every agent registered within the timeout
  int coordinator_threads_max = 0;
  double coordinator_cpu_per_s = 0;        // CPU seconds per second of the storm window
  double coordinator_cpu_ms_per_1k_heartbeats = 0;
  double coordinator_rss_max_mib = 0;
  double bench_cpu_per_s = 0;              // this process (the fleet and the clients)
  double heartbeats_per_s = 0;
  double heartbeat_rtt_p50_ms = 0, heartbeat_rtt_p99_ms = 0;
  double nowait_rtt_p50_ms = 0, nowait_rtt_p99_ms = 0;  // heartbeats with max_wait_ms 0
  int64_t heartbeat_errors = 0;
  int64_t reregisters = 0;
  std::string first_fleet_error;           // the fleet's first failed RPC, if any
  double submits_per_s = 0;
  double submit_p50_ms = 0, submit_p99_ms = 0;
  double floor_p50_ms = 0, floor_p99_ms = 0;  // baseline: an RPC rejected at the edge
  int64_t submitted = 0;
  int64_t submit_duplicates = 0;
  std::map<std::string, int64_t> submit_errors;
  int64_t ranks_started = 0, ranks_exited = 0;
  int64_t jobs_succeeded = 0;              // SUCCEEDED at the end of the window
  int64_t jobs_total = 0;
  int nodes_up = 0;                        // UP at the end of the window
  double window_s = 0;
  bool tls = false;
  bool etcd = false;  // the state on etcd (BenchRunOptions::etcd_state)
};

// Runs one measurement. Errors: the coordinator did not start, or exited.
absl::StatusOr<BenchRunResult> RunBench(const BenchRunOptions& options);

}  // namespace athanor::bench
