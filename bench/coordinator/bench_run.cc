#include "bench/coordinator/bench_run.h"

#include <sys/resource.h>

#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "testing/coordinator/coordinator_process.h"
#include "bench/coordinator/proc_sampler.h"
#include "testing/coordinator/sim_fleet.h"
#include "bench/coordinator/submit_storm.h"
#include "common/net.h"
#include "proto/athanor.grpc.pb.h"
#include "security/cluster_ca.h"

namespace athanor::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// Counts jobs and SUCCEEDED jobs, and UP nodes, as the coordinator has them now.
void CountCluster(const CoordinatorProcess& coordinator, BenchRunResult* r) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // every job ever submitted in one reply
  std::shared_ptr<grpc::ChannelCredentials> creds = coordinator.ChannelCredentials(&args);
  auto channel = grpc::CreateCustomChannel(coordinator.address(), creds, args);
  std::unique_ptr<rpc::Coordinator::Stub> stub = rpc::Coordinator::NewStub(channel);
  grpc::ClientContext jobs_ctx;
  jobs_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  rpc::ListJobsRequest req;
  req.set_all(true);
  rpc::ListJobsResponse jobs;
  if (stub->ListJobs(&jobs_ctx, req, &jobs).ok()) {
    r->jobs_total = jobs.jobs_size();
    for (const rpc::Job& j : jobs.jobs()) r->jobs_succeeded += j.state() == rpc::JOB_SUCCEEDED;
  }
  grpc::ClientContext nodes_ctx;
  nodes_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  rpc::ListNodesResponse nodes;
  if (stub->ListNodes(&nodes_ctx, rpc::ListNodesRequest(), &nodes).ok()) {
    for (const rpc::Node& n : nodes.nodes()) r->nodes_up += n.state() == rpc::NODE_UP;
  }
}

}  // namespace

absl::StatusOr<BenchRunResult> RunBench(const BenchRunOptions& o) {
  BenchRunResult r;
  r.agents = o.agents;
  r.tls = o.tls;
  r.etcd = !o.etcd_state.empty();
  absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) return port.status();
  CoordinatorProcessOptions co;
  co.binary = o.coordinator_binary;
  co.state_path = r.etcd ? o.etcd_state : o.work_dir + "/state.db";
  co.log_path = o.work_dir + "/coordinator.log";
  co.port = *port;
  co.extra_flags = {"--heartbeat-interval-ms", std::to_string(o.heartbeat_interval_ms)};
  // The bench's etcd members run with --max-txn-ops 4096 (testing/etcd).
  if (r.etcd) {
    co.extra_flags.insert(co.extra_flags.end(), {"--local-dir", o.work_dir + "/local", "--etcd-max-txn-ops", "4096"});
  }
  co.extra_flags.insert(co.extra_flags.end(), o.coordinator_flags.begin(),
                        o.coordinator_flags.end());
  if (o.tls) {
    co.tls_dir = o.work_dir + "/tls";
    if (absl::Status s = security::InitClusterCa(co.tls_dir); !s.ok()) return s;
  }
  CoordinatorProcess coordinator(co);
  if (absl::Status s = coordinator.Start(); !s.ok()) return s;
  ProcSampler sampler(coordinator.pid(), std::chrono::milliseconds(200));

  SimFleetOptions fo;
  fo.address = coordinator.address();
  fo.agents = o.agents;
  fo.connections = o.connections;
  fo.register_concurrency = o.register_concurrency;
  fo.run_time = o.run_time;
  fo.tls_dir = co.tls_dir;
  SimFleet fleet(fo);
  Clock::time_point t0 = Clock::now();
  fleet.Start();
  // A fleet that has not registered by the timeout is measured as it is (the
  // rest keep trying); `registered` says how far it got.
  bool complete = fleet.WaitRegistered(o.register_timeout);
  r.register_s = std::chrono::duration<double>(Clock::now() - t0).count();
  FleetCounters at_start = fleet.Take();
  r.registered = at_start.registered;
  if (!at_start.first_error.empty()) r.first_fleet_error = at_start.first_error;
  r.fleet_complete = complete;
  // Warm-up: every agent in its heartbeat loop before the window opens. Waits
  // on a steady clock on purpose: this is the measured system settling.
  std::this_thread::sleep_for(o.warmup); /* sleep override */
  fleet.Take();

  std::optional<ProcSample> before = ReadProcSample(coordinator.pid());
  double self_before = SelfCpuSeconds();
  SubmitStormOptions so;
  so.address = coordinator.address();
  so.clients = o.clients;
  so.duration = o.duration;
  so.seed = o.seed;
  so.tls_dir = co.tls_dir;
  so.key_prefix = absl::StrCat("bench-", o.agents);
  SubmitStormResult storm = RunSubmitStorm(so);
  FleetCounters fleet_counters = fleet.Take();
  std::optional<ProcSample> after = ReadProcSample(coordinator.pid());
  double self_after = SelfCpuSeconds();
  r.window_s = storm.elapsed_s;
  CountCluster(coordinator, &r);
  fleet.Stop();

  if (!before || !after) {
    return absl::InternalError(absl::StrCat("the coordinator exited during the run:\n",
                                            coordinator.LogTail()));
  }
  double cpu = after->cpu_s - before->cpu_s;
  r.coordinator_cpu_per_s = cpu / r.window_s;
  r.coordinator_threads_max = sampler.max_threads();
  r.coordinator_rss_max_mib = static_cast<double>(sampler.max_rss_kb()) / 1024.0;
  r.bench_cpu_per_s = (self_after - self_before) / r.window_s;
  r.heartbeats_per_s = static_cast<double>(fleet_counters.heartbeats) / r.window_s;
  if (fleet_counters.heartbeats > 0) {
    r.coordinator_cpu_ms_per_1k_heartbeats =
        cpu * 1000.0 / (static_cast<double>(fleet_counters.heartbeats) / 1000.0);
  }
  r.heartbeat_rtt_p50_ms = Percentile(fleet_counters.rtt_ms, 50);
  r.heartbeat_rtt_p99_ms = Percentile(fleet_counters.rtt_ms, 99);
  r.nowait_rtt_p50_ms = Percentile(fleet_counters.rtt_nowait_ms, 50);
  r.nowait_rtt_p99_ms = Percentile(fleet_counters.rtt_nowait_ms, 99);
  r.heartbeat_errors = fleet_counters.heartbeat_errors;
  if (r.first_fleet_error.empty()) r.first_fleet_error = fleet_counters.first_error;
  r.reregisters = fleet_counters.reregisters;
  r.ranks_started = fleet_counters.ranks_started;
  r.ranks_exited = fleet_counters.ranks_exited;
  r.submitted = storm.accepted;
  r.submit_duplicates = storm.duplicates;
  r.submit_errors = storm.errors;
  r.submits_per_s = static_cast<double>(storm.accepted) / r.window_s;
  r.submit_p50_ms = Percentile(storm.latency_ms, 50);
  r.submit_p99_ms = Percentile(storm.latency_ms, 99);
  r.floor_p50_ms = Percentile(storm.floor_ms, 50);
  r.floor_p99_ms = Percentile(storm.floor_ms, 99);
  coordinator.Stop();
  return r;
}

}  // namespace athanor::bench
