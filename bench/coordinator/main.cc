// athanor-bench-coordinator: a real athanor-coordinator process under a
// simulated fleet of agents and a submission storm, over real gRPC on loopback.
//
//   athanor-bench-coordinator [--agents 1000,3000,10000] [--clients 16]
//                             [--duration-s 15] [--json]
//
// For each fleet size it starts a fresh coordinator (temp --state, a free
// port), registers N simulated agents with 8 GPUs each (heartbeating at the
// production interval and running every job placed on them for --run-time-ms),
// waits --warmup-s, then runs M clients submitting one-node jobs for
// --duration-s while the scheduler keeps placing them. It reports the
// coordinator's threads, CPU, RSS, heartbeat round trip, heartbeats/s, accepted
// submissions/s and submit latency. With --state-backend etcd (or both) it
// also starts a local etcd cluster and runs the coordinator on it (each run
// under a prefix of its own), beside the SQLite run for the same size.
#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/coordinator/bench_run.h"
#include "testing/etcd/etcd_cluster.h"
#include "testing/coordinator/coordinator_process.h"
#include "common/options.h"

namespace athanor::bench {
namespace {

nlohmann::json ToJson(const BenchRunResult& r) {
  return {{"agents", r.agents},
          {"register_s", r.register_s},
          {"registered", r.registered},
          {"fleet_complete", r.fleet_complete},
          {"window_s", r.window_s},
          {"coordinator_threads_max", r.coordinator_threads_max},
          {"coordinator_cpu_per_s", r.coordinator_cpu_per_s},
          {"coordinator_cpu_ms_per_1k_heartbeats", r.coordinator_cpu_ms_per_1k_heartbeats},
          {"coordinator_rss_max_mib", r.coordinator_rss_max_mib},
          {"bench_cpu_per_s", r.bench_cpu_per_s},
          {"heartbeats_per_s", r.heartbeats_per_s},
          {"heartbeat_rtt_p50_ms", r.heartbeat_rtt_p50_ms},
          {"heartbeat_rtt_p99_ms", r.heartbeat_rtt_p99_ms},
          {"nowait_heartbeat_rtt_p50_ms", r.nowait_rtt_p50_ms},
          {"nowait_heartbeat_rtt_p99_ms", r.nowait_rtt_p99_ms},
          {"heartbeat_errors", r.heartbeat_errors},
          {"reregisters", r.reregisters},
          {"first_fleet_error", r.first_fleet_error},
          {"submits_per_s", r.submits_per_s},
          {"submit_p50_ms", r.submit_p50_ms},
          {"submit_p99_ms", r.submit_p99_ms},
          {"rpc_floor_p50_ms", r.floor_p50_ms},
          {"rpc_floor_p99_ms", r.floor_p99_ms},
          {"submitted", r.submitted},
          {"submit_duplicates", r.submit_duplicates},
          {"submit_errors", r.submit_errors},
          {"ranks_started", r.ranks_started},
          {"ranks_exited", r.ranks_exited},
          {"jobs_succeeded", r.jobs_succeeded},
          {"jobs_total", r.jobs_total},
          {"nodes_up", r.nodes_up},
          {"tls", r.tls},
          {"state", r.etcd ? "etcd" : "sqlite"}};
}

void PrintTable(const std::vector<BenchRunResult>& rows) {
  std::cout << absl::StrFormat(
      "%7s %7s %6s %7s %7s %8s %7s %8s %8s %8s %8s %8s %6s %8s %8s %8s %8s %8s %6s %7s %6s\n", "agents",
      "reg'd", "reg_s", "threads", "cpu/s", "cpu_ms/k", "rss_MiB", "hb/s", "rtt_p50", "rtt_p99",
      "rtt0_p50", "rtt0_p99", "hb_err", "submit/s", "sub_p50", "sub_p99", "flr_p50", "flr_p99", "s_err", "done",
      "up");
  for (const BenchRunResult& r : rows) {
    if (r.tls) std::cout << "(tls) ";
    if (r.etcd) std::cout << "(etcd) ";
    int64_t submit_errors = 0;
    for (const auto& [code, n] : r.submit_errors) submit_errors += n;
    std::cout << absl::StrFormat(
        "%7d %7d %6.1f %7d %7.2f %8.1f %7.0f %8.0f %8.1f %8.1f %8.1f %8.1f %6d %8.0f %8.1f %8.1f %8.1f %8.1f "
        "%6d %7d %6d\n",
        r.agents, r.registered, r.register_s, r.coordinator_threads_max, r.coordinator_cpu_per_s,
        r.coordinator_cpu_ms_per_1k_heartbeats, r.coordinator_rss_max_mib, r.heartbeats_per_s,
        r.heartbeat_rtt_p50_ms, r.heartbeat_rtt_p99_ms, r.nowait_rtt_p50_ms,
        r.nowait_rtt_p99_ms, r.heartbeat_errors, r.submits_per_s, r.submit_p50_ms,
        r.submit_p99_ms, r.floor_p50_ms, r.floor_p99_ms, submit_errors, r.jobs_succeeded, r.nodes_up);
  }
  std::cout << "reg'd: agents registered before the window (reg_s: how long it took);\n"
               "threads, rss: coordinator maxima over the run; cpu/s: coordinator CPU seconds per\n"
               "second of the storm window; cpu_ms/k: per 1,000 heartbeats; rtt: heartbeat reply -\n"
               "send - held_ms (ms; held_ms is what the coordinator reports holding the long-poll);\n"
               "rtt0: heartbeats sent with max_wait_ms 0 (exit reports); flr: the baseline, a GetJob\n"
               "rejected at the service's edge (no lock, no commit) during the same window;\n"
               "s_err: failed submissions; done: jobs SUCCEEDED;\n"
               "up: nodes UP at the end of the window; (tls): mutual TLS and tokens (--security);\n"
               "(etcd): the state on a local etcd cluster (--state-backend).\n";
  // --state-backend both: each etcd run against the SQLite run before it.
  for (size_t i = 1; i < rows.size(); ++i) {
    const BenchRunResult& sqlite = rows[i - 1];
    const BenchRunResult& etcd = rows[i];
    if (sqlite.etcd || !etcd.etcd || sqlite.agents != etcd.agents || sqlite.tls != etcd.tls) continue;
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::cout << absl::StrFormat("etcd/sqlite at %d agents: submit/s %.2fx, sub_p50 %.2fx, sub_p99 %.2fx, rtt_p99 %.2fx\n",
                                 etcd.agents, ratio(etcd.submits_per_s, sqlite.submits_per_s),
                                 ratio(etcd.submit_p50_ms, sqlite.submit_p50_ms),
                                 ratio(etcd.submit_p99_ms, sqlite.submit_p99_ms),
                                 ratio(etcd.heartbeat_rtt_p99_ms, sqlite.heartbeat_rtt_p99_ms));
  }
  // --security both: each TLS run against the plain run before it.
  for (size_t i = 1; i < rows.size(); ++i) {
    const BenchRunResult& plain = rows[i - 1];
    const BenchRunResult& tls = rows[i];
    if (plain.tls || !tls.tls || plain.agents != tls.agents) continue;
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::cout << absl::StrFormat(
        "tls/plain at %d agents: cpu_ms/k %.2fx, sub_p50 %.2fx, sub_p99 %.2fx, flr_p50 %.2fx, rtt0_p50 %.2fx\n",
        tls.agents, ratio(tls.coordinator_cpu_ms_per_1k_heartbeats, plain.coordinator_cpu_ms_per_1k_heartbeats),
        ratio(tls.submit_p50_ms, plain.submit_p50_ms), ratio(tls.submit_p99_ms, plain.submit_p99_ms),
        ratio(tls.floor_p50_ms, plain.floor_p50_ms), ratio(tls.nowait_rtt_p50_ms, plain.nowait_rtt_p50_ms));
  }
}

// Raises the soft open-file limit to what `needed` descriptors require.
bool RaiseFileLimit(rlim_t needed) {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return false;
  if (l.rlim_cur >= needed) return true;
  if (l.rlim_max != RLIM_INFINITY && l.rlim_max < needed) return false;
  l.rlim_cur = needed;
  return setrlimit(RLIMIT_NOFILE, &l) == 0;
}

int Run(int argc, char** argv) {
  // The simulated fleet and clients stand in for other machines: lock-order
  // checking (an edge recorded on every contended absl::Mutex, gRPC's own
  // included) would charge them CPU the coordinator then lacks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string agents_list, coordinator, work_dir, coordinator_flags, json_file, security = "plain";
  std::string state_backend = "sqlite";
  int etcd_members = 3;
  int clients = 16, connections = 0, interval_ms = 1000, register_concurrency = 64;
  double duration_s = 15, warmup_s = 3, run_time_ms = 2000, register_timeout_s = 180;
  uint32_t seed = 1;
  bool json = false;
  po::options_description desc("athanor-bench-coordinator options");
  desc.add_options()
      ("agents", po::value(&agents_list)->default_value("1000,3000,10000"),
       "fleet sizes to measure, comma-separated; each gets a fresh coordinator")
      ("clients", po::value(&clients)->default_value(16), "submitting client threads")
      ("duration-s", po::value(&duration_s)->default_value(15), "storm window per fleet size")
      ("warmup-s", po::value(&warmup_s)->default_value(3),
       "after every agent registered, before the window")
      ("run-time-ms", po::value(&run_time_ms)->default_value(2000),
       "how long each placed rank runs before exiting 0")
      ("heartbeat-interval-ms", po::value(&interval_ms)->default_value(1000),
       "the coordinator's --heartbeat-interval-ms (agents long-poll this long)")
      ("connections", po::value(&connections)->default_value(0),
       "TCP connections the fleet shares (0: one per agent, as real agents)")
      ("register-concurrency", po::value(&register_concurrency)->default_value(64),
       "RegisterNode calls in flight at once while the fleet starts (0: every agent at once)")
      ("register-timeout-s", po::value(&register_timeout_s)->default_value(180),
       "measure the fleet as it is when not every agent registered by then")
      ("coordinator", po::value(&coordinator)->default_value(DefaultCoordinatorBinary()),
       "athanor-coordinator binary")
      ("coordinator-flags", po::value(&coordinator_flags)->default_value(""),
       "extra coordinator flags, space-separated")
      ("work-dir", po::value(&work_dir)->default_value(""),
       "where each run's state and log go (default: a fresh folder under /tmp)")
      ("seed", po::value(&seed)->default_value(1), "seed of the job shapes")
      ("security", po::value(&security)->default_value("plain"),
       "plain (--insecure), tls (a CA, mutual TLS, tokens) or both (plain then tls per size)")
      ("state-backend", po::value(&state_backend)->default_value("sqlite"),
       "where the coordinator keeps its state: sqlite, etcd (a local etcd cluster, Debian's "
       "/usr/bin/etcd, started by the bench) or both (sqlite then etcd per size)")
      ("etcd-members", po::value(&etcd_members)->default_value(3), "members of that etcd cluster (1..7)")
      ("json", po::bool_switch(&json), "print JSON instead of the table")
      ("json-file", po::value(&json_file)->default_value(""), "also write the JSON to this file");
  ParsedCommandLine cmd;
  absl::Status s = ParseOptions(argc, argv, desc, "usage: athanor-bench-coordinator [flags]", &cmd);
  if (!s.ok()) {
    std::cerr << "athanor-bench-coordinator: " << s.message() << "\n";
    return 2;
  }
  if (cmd.help) return 0;
  if (security != "plain" && security != "tls" && security != "both") {
    std::cerr << "athanor-bench-coordinator: --security: expected plain, tls or both, got '" << security << "'\n";
    return 2;
  }
  if ((state_backend != "sqlite" && state_backend != "etcd" && state_backend != "both") || etcd_members < 1 ||
      etcd_members > 7) {
    std::cerr << "athanor-bench-coordinator: --state-backend: expected sqlite, etcd or both (got '" << state_backend
              << "'); --etcd-members 1..7\n";
    return 2;
  }
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(agents_list, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 100000) {
      std::cerr << "athanor-bench-coordinator: --agents: '" << part
                << "' is not a fleet size in 1..100000\n";
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty() || clients < 1 || clients > 1024 || duration_s <= 0 || warmup_s < 0 ||
      run_time_ms < 0 || interval_ms < 1 || connections < 0 || register_concurrency < 0 ||
      register_timeout_s <= 0) {
    std::cerr << "athanor-bench-coordinator: --agents needs a size; --clients 1..1024; "
                 "--duration-s, --heartbeat-interval-ms and --register-timeout-s > 0; the rest >= 0\n";
    return 2;
  }
  if (work_dir.empty()) {
    char tmpl[] = "/tmp/athanor_bench_coordinator.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::cerr << "athanor-bench-coordinator: cannot create a folder under /tmp\n";
      return 1;
    }
    work_dir = tmpl;
  }
  std::unique_ptr<testing_etcd::EtcdCluster> etcd;
  if (state_backend != "sqlite") {
    absl::StatusOr<std::unique_ptr<testing_etcd::EtcdCluster>> started =
        testing_etcd::EtcdCluster::Start(etcd_members, work_dir + "/etcd");
    if (!started.ok()) {
      std::cerr << "athanor-bench-coordinator: etcd: " << started.status() << "\n";
      return 1;
    }
    etcd = std::move(*started);
  }
  std::vector<BenchRunResult> rows;
  bool failed = false;
  int run_index = 0;
  for (int n : sizes) {
    // One descriptor per connection here and in the coordinator (which
    // inherits the limit), plus the clients and slack.
    rlim_t needed = static_cast<rlim_t>(connections > 0 ? std::min(connections, n) : n) +
                    static_cast<rlim_t>(clients) + 256;
    if (!RaiseFileLimit(needed)) {
      std::cerr << "athanor-bench-coordinator: " << n << " agents need " << needed
                << " open files, above the hard limit (ulimit -Hn); use --connections\n";
      return 1;
    }
    for (bool tls : {false, true}) {
    if ((tls && security == "plain") || (!tls && security == "tls")) continue;
    for (bool on_etcd : {false, true}) {
    if ((on_etcd && state_backend == "sqlite") || (!on_etcd && state_backend == "etcd")) continue;
    BenchRunOptions o;
    o.tls = tls;
    // Each run its own prefix: a fresh, empty state.
    if (on_etcd) o.etcd_state = etcd->uri(absl::StrCat("bench-", run_index++));
    o.coordinator_binary = coordinator;
    o.work_dir = absl::StrCat(work_dir, "/agents-", n, tls ? "-tls" : "", on_etcd ? "-etcd" : "");
    std::filesystem::create_directories(o.work_dir);
    o.coordinator_flags = absl::StrSplit(coordinator_flags, ' ', absl::SkipEmpty());
    o.agents = n;
    o.connections = connections;
    o.register_concurrency = register_concurrency;
    o.heartbeat_interval_ms = interval_ms;
    o.run_time = std::chrono::milliseconds(static_cast<int64_t>(run_time_ms));
    o.clients = clients;
    o.warmup = std::chrono::milliseconds(static_cast<int64_t>(warmup_s * 1000));
    o.duration = std::chrono::milliseconds(static_cast<int64_t>(duration_s * 1000));
    o.register_timeout = std::chrono::milliseconds(static_cast<int64_t>(register_timeout_s * 1000));
    o.seed = seed;
    if (!json) std::cerr << "measuring " << n << " agents (" << o.work_dir << ")...\n";
    absl::StatusOr<BenchRunResult> r = RunBench(o);
    if (!r.ok()) {
      std::cerr << "athanor-bench-coordinator: " << n << " agents: " << r.status() << "\n";
      failed = true;
      continue;
    }
    if (!r->fleet_complete) {
      std::cerr << "athanor-bench-coordinator: " << n << " agents: only " << r->registered
                << " registered within --register-timeout-s; measured as it was\n";
    }
    if (!r->first_fleet_error.empty()) {
      std::cerr << "athanor-bench-coordinator: " << n
                << " agents: first failed agent RPC: " << r->first_fleet_error << "\n";
    }
    rows.push_back(*r);
    }
    }
  }
  nlohmann::json out;
  out["config"] = {{"clients", clients},           {"duration_s", duration_s},
                   {"warmup_s", warmup_s},         {"run_time_ms", run_time_ms},
                   {"heartbeat_interval_ms", interval_ms}, {"connections", connections},
                   {"register_concurrency", register_concurrency},
                   {"gpus_per_agent", 8},          {"seed", seed}};
  for (const BenchRunResult& r : rows) out["runs"].push_back(ToJson(r));
  if (!json_file.empty()) {
    std::ofstream f(json_file);
    f << out.dump(2) << "\n";
    if (!f) {
      std::cerr << "athanor-bench-coordinator: cannot write " << json_file << "\n";
      return 1;
    }
  }
  if (json) {
    std::cout << out.dump(2) << "\n";
  } else {
    PrintTable(rows);
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace athanor::bench

int main(int argc, char** argv) { return athanor::bench::Run(argc, argv); }
