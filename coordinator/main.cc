// athanor-coordinator: the cluster's single authority over allocations.
//
//   athanor-coordinator --listen 0.0.0.0:7700 --state /var/lib/athanor/state.db
//                       --tls-dir /etc/athanor/tls
//   athanor-coordinator --listen 0.0.0.0:7700 --advertise c1.example:7700
//                       --state etcd://e1:2379,e2:2379,e3:2379/athanor
//                       --local-dir /var/lib/athanor --tls-dir /etc/athanor/tls
//
// With --state etcd://..., several coordinators share the state and one
// leads (store/etcd/leader_election.h): a standby answers every call with
// the leader's address (rpc/standby_server.h) while it waits; the leader
// loads the state, builds the core and serves. A leader that can
// no longer be sure it leads exits at once (status 3) for its supervisor to
// start it again as a candidate.
//
// Secure by default (docs/security.md): TLS from --tls-dir, agents by their
// certificates, users by bearer tokens. It refuses to start without TLS
// material unless told --insecure and listening on loopback only.
// Serves the Coordinator (CLI), Billing and NodeAgent (agents) gRPC services
// on one port. SIGTERM/SIGINT shut it down cleanly; kill -9 loses nothing durable.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <atomic>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/builtin_stores.h"
#include "common/coordinator_targets.h"
#include "common/logging.h"
#include "common/options.h"
#include "common/status.h"
#include "common/uri.h"
#include "coordinator/auth/auth_setup.h"
#include "coordinator/core/coordinator_core.h"
#include "coordinator/core/job_network.h"
#include "coordinator/health/hang_flags.h"
#include "coordinator/observability/dashboard_http.h"
#include "coordinator/observability/dashboard_rpc.h"
#include "coordinator/observability/metrics_registry.h"
#include "coordinator/observability/metrics_rpc.h"
#include "coordinator/observability/observability_service.h"
#include "coordinator/rpc/agent_service.h"
#include "coordinator/rpc/billing_service.h"
#include "coordinator/rpc/checkpoint_commit_service.h"
#include "coordinator/rpc/coordinator_service.h"
#include "coordinator/rpc/images_service.h"
#include "coordinator/rpc/interactive_service.h"
#include "coordinator/rpc/notebook_proxy.h"
#include "coordinator/rpc/node_data_service.h"
#include "coordinator/rpc/standby_server.h"
#include "coordinator/rpc/workdir_data_service.h"
#include "coordinator/rpc/volumes_service.h"
#include "coordinator/store/etcd/etcd_client.h"
#include "coordinator/store/etcd/etcd_store.h"
#include "coordinator/store/etcd/leader_election.h"
#include "coordinator/store/sqlite/sqlite_store.h"
#include "security/tls.h"

namespace athanor::coord {
namespace {

constexpr int kMaxRpcThreads = 16;

// Exit status of a leader that lost the lead or was fenced: its supervisor
// starts it again, as a candidate.
constexpr int kExitLostLead = 3;

[[noreturn]] void ExitLostLead(const char* why) {
  std::string line = absl::StrCat("athanor-coordinator: ", why, "; exiting (status 3) to stand again\n");
  (void)!write(STDERR_FILENO, line.data(), line.size());
  _exit(kExitLostLead);
}

// What the state lives on: a SQLite file, or etcd shared with standbys.
struct StateFlags {
  std::string local_dir;  // etcd: tokens, secrets and the default data store
  etcd::EtcdTls tls;
  int64_t lease_ttl_s = 5;
  int max_txn_ops = 128;  // etcd's --max-txn-ops (its default)
};

// The etcd side of a leading coordinator: its client and its election, and
// what StateStatus reports.
struct EtcdLeadership {
  std::unique_ptr<etcd::EtcdClient> client;
  std::unique_ptr<etcd::LeaderElection> election;
  std::string location;  // etcd://endpoints/prefix
  std::string self;      // the advertised address
  int64_t led_since_unix = 0;
  int64_t terms = 0;  // terms won on the prefix, this one included

  absl::Status Report(rpc::StateStatusResponse* r) const {
    r->set_backend("etcd");
    r->set_location(location);
    r->set_self(self);
    r->set_leadership_changes(1);  // a process that loses the lead exits
    r->set_led_since_unix(led_since_unix);
    absl::StatusOr<std::pair<std::string, int64_t>> leader =
        etcd::LeaderElection::Leader(client.get(), client->uri().prefix);
    if (leader.ok()) {
      r->set_leader(leader->first);
      r->set_term(leader->second);
    } else if (!absl::IsNotFound(leader.status())) {
      return leader.status();
    }
    absl::StatusOr<std::vector<etcd::MemberStatus>> members = client->Members();
    if (!members.ok()) return members.status();
    int64_t leader_index = -1;  // etcd's Raft leader's
    for (const etcd::MemberStatus& m : *members) {
      if (m.reachable && m.is_leader) leader_index = m.raft_index;
    }
    for (const etcd::MemberStatus& m : *members) {
      rpc::StateMember* out = r->add_members();
      out->set_name(m.name);
      for (const std::string& u : m.client_urls) out->add_client_urls(u);
      out->set_reachable(m.reachable);
      out->set_is_leader(m.is_leader);
      out->set_raft_index(m.raft_index);
      out->set_lag(m.reachable && leader_index >= 0 ? leader_index - m.raft_index : -1);
      out->set_db_size_bytes(m.db_size);
    }
    return absl::OkStatus();
  }
};

// Campaigns until this process leads (nullptr and OK when `stop` came first).
absl::StatusOr<std::unique_ptr<EtcdLeadership>> Lead(const etcd::EtcdUri& uri, const StateFlags& flags,
                                                     const std::string& self, StandbyServer* standby,
                                                     absl::Notification* stop) {
  auto lead = std::make_unique<EtcdLeadership>();
  ASSIGN_OR_RETURN(lead->client, etcd::EtcdClient::Create(uri, flags.tls));
  lead->location = absl::StrCat("etcd://", absl::StrJoin(uri.endpoints, ","), uri.prefix);
  lead->self = self;
  etcd::LeaderElection::Options options;
  options.prefix = uri.prefix;
  options.address = self;
  options.ttl = std::chrono::seconds(flags.lease_ttl_s);
  // A standby reads the leader key every 100 ms: one small read per standby,
  // and a takeover starts within 0.1 s of the key going.
  options.retry = std::chrono::milliseconds(100);
  options.on_lost = [] { ExitLostLead("lost the lead (its etcd lease)"); };
  options.on_waiting = [standby](const std::string& leader, int64_t term) {
    ATHANOR_LOG(INFO) << "standby: " << leader << " leads (term " << term << "); waiting";
    standby->SetLeader(leader, term);
  };
  ATHANOR_LOG(INFO) << "campaigning on " << lead->location << " as " << self;
  absl::StatusOr<std::unique_ptr<etcd::LeaderElection>> election =
      etcd::LeaderElection::Campaign(lead->client.get(), std::move(options), stop);
  if (absl::IsCancelled(election.status())) return nullptr;
  if (!election.ok()) return election.status();
  lead->election = std::move(*election);
  lead->led_since_unix = absl::ToUnixSeconds(absl::Now());
  absl::StatusOr<int64_t> terms = lead->election->CountTerm();
  if (absl::IsFailedPrecondition(terms.status())) ExitLostLead("fenced while counting its term");
  if (!terms.ok()) return terms.status();
  lead->terms = *terms;
  ATHANOR_LOG(INFO) << "leading (term " << lead->election->term() << ", leadership " << lead->terms
                    << " on this prefix)";
  return lead;
}

int Run(int argc, char** argv) {
  std::string listen, state_path, advertise, port_range, log_level, job_network;
  double heartbeat_timeout_s = 10, default_grace_s = ToSeconds(sched::kDefaultGrace),
         min_run_time_s = ToSeconds(sched::kDefaultMinRunTime),
         age_limit_s = ToSeconds(sched::SchedulerOptions{}.age_limit),
         las_recall_after_s = ToSeconds(sched::LasOptions{}.recall_after);
  double idle_reclaim_grace_s = 60, checkpoint_poll_s = 30, checkpoint_upload_wait_s = 600;
  double idle_cpu_fraction = 0.01, idle_net_bytes_per_s = 64 * 1024, idle_disk_bytes_per_s = 64 * 1024;
  double volume_store_wait_s = 600;
  int32_t snapshot_keep = 5;
  int64_t snapshot_max_bytes = kDefaultWorkdirMaxBytes;
  double billing_interval_s = 60;
  double max_heartbeats_per_s = 2000;
  bool no_backfill = false, no_metrics = false, keep_head = false, strict_fair_share = false;
  std::string scheduling_policy = "default";
  std::string http_listen, chartjs_dir;
  std::string notebook_listen;
  std::vector<std::string> quotas;
  SecurityFlags security_flags;
  int64_t heartbeat_interval_ms = 1000, kill_after_ms = 5000;
  std::string data_store_uri;  // images' and volumes' content
  int64_t image_max_bytes = kDefaultImageMaxBytes;
  VolumeQuota volume_quota;  // per tenant, where its policy sets none
  StateFlags state_flags;
  po::options_description desc("athanor-coordinator options");
  desc.add_options()
      ("listen", po::value(&listen)->default_value("127.0.0.1:7700"), "HOST:PORT to serve gRPC on")
      ("state", po::value(&state_path)->required(),
       "SQLite database holding jobs and nodes, or etcd://HOST:PORT,HOST:PORT.../PREFIX: the state on "
       "etcd, shared with standby coordinators (one leads; docs/operations.md)")
      ("local-dir", po::value(&state_flags.local_dir)->default_value(""),
       "with etcd: this coordinator's own folder (tokens, tenants' credentials, the default --data-store)")
      ("etcd-ca", po::value(&state_flags.tls.ca_file)->default_value(""),
       "with etcd: CA (PEM) the members' certificates are checked against (empty: plaintext)")
      ("etcd-cert", po::value(&state_flags.tls.cert_file)->default_value(""),
       "with etcd: client certificate (PEM) to present")
      ("etcd-key", po::value(&state_flags.tls.key_file)->default_value(""), "with etcd: its key")
      ("etcd-lease-ttl-s", po::value(&state_flags.lease_ttl_s)->default_value(5),
       "with etcd: the leader's lease; a standby takes over at most this long after a leader dies")
      ("etcd-max-txn-ops", po::value(&state_flags.max_txn_ops)->default_value(128),
       "with etcd: the members' --max-txn-ops (operations in one transaction)")
      ("data-store", po::value(&data_store_uri)->default_value(""),
       "object store (file:// or s3://) holding images' and volumes' content (default: file://<the "
       "folder of --state>/data)")
      ("image-max-bytes", po::value(&image_max_bytes)->default_value(image_max_bytes),
       "the largest image (its root-filesystem tar) a tenant may import")
      ("volume-quota-bytes", po::value(&volume_quota.max_bytes)->default_value(volume_quota.max_bytes),
       "the sum of a tenant's volumes' size limits, unless its policy sets another (admin tenant set)")
      ("volume-quota-count", po::value(&volume_quota.max_count)->default_value(volume_quota.max_count),
       "how many volumes a tenant may hold, unless its policy sets another")
      ("advertise", po::value(&advertise)->default_value(""),
       "HOST:PORT clients dial: ranks see it as ATHANOR_COORDINATOR, and with etcd the leader "
       "names itself by it (default: --listen)")
      ("heartbeat-timeout-s", po::value(&heartbeat_timeout_s)->default_value(10),
       "a node without a heartbeat for this long is DOWN")
      ("heartbeat-interval-ms", po::value(&heartbeat_interval_ms)->default_value(1000),
       "agents' heartbeat interval (longest long-poll)")
      ("max-heartbeats-per-s", po::value(&max_heartbeats_per_s)->default_value(2000),
       "stretch the heartbeat interval to nodes / this rate once the fleet is that large, and the "
       "DOWN timeout in proportion (0: fixed)")
      ("kill-after-ms", po::value(&kill_after_ms)->default_value(5000),
       "SIGTERM to SIGKILL delay for ranks of a stopped attempt")
      ("master-port-range", po::value(&port_range)->default_value("29500-29999"),
       "MASTER_PORT values handed to attempts, MIN-MAX")
      ("job-network", po::value(&job_network)->default_value(""),
       "CIDR (/8 to /24, e.g. 10.64.0.0/10): each job attempt gets a /24 of it and its ranks a network "
       "of their own, reaching only the attempt's other nodes (docs/security.md); empty: off")
      ("default-grace-s", po::value(&default_grace_s)->default_value(default_grace_s),
       "preemption grace (SIGTERM to SIGKILL) for jobs that name none")
      ("min-run-time-s", po::value(&min_run_time_s)->default_value(min_run_time_s),
       "a job runs at least this long before the scheduler may preempt it")
      ("quota", po::value(&quotas)->composing(),
       "TENANT=GPUS hard GPU quota (repeatable); `athanor quota set` overrides it")
      ("no-backfill", po::bool_switch(&no_backfill), "strict priority order: no backfill")
      ("scheduling-policy", po::value(&scheduling_policy)->default_value("default"),
       "order of pending jobs: default (priorities, fair share) or las (least attained GPU "
       "time first; docs/operations.md, \"Scheduling policy\")")
      ("age-limit-s", po::value(&age_limit_s)->default_value(age_limit_s),
       "a job pending this long goes ahead of every priority class and tenant (0: never)")
      ("las-recall-after-s", po::value(&las_recall_after_s)->default_value(las_recall_after_s),
       "las: a job preempted for order, or whose node went down, takes GPUs back after waiting this "
       "long from jobs of its class started since (0: never)")
      ("keep-head", po::bool_switch(&keep_head),
       "default policy with --strict-fair-share: the job holding the reservation keeps it until it "
       "starts, rather than class and fair share choosing it afresh each pass (bounds the worst "
       "waits, costs mean JCT)")
      ("strict-fair-share", po::bool_switch(&strict_fair_share),
       "default policy: fair share orders every pending job, the one holding the reservation too "
       "(a tenant above its share waits while others submit); without it jobs start in submit "
       "order up to the first that cannot start, and fair share orders the jobs behind that one")
      ("idle-reclaim-grace-s", po::value(&idle_reclaim_grace_s)->default_value(60),
       "an idle interactive allocation is reclaimed this long after its warning")
      ("idle-cpu-fraction", po::value(&idle_cpu_fraction)->default_value(0.01, "0.01"),
       "an interactive instance is in use at this share of one core (x100: GPU utilisation %)")
      ("idle-net-bytes-per-s", po::value(&idle_net_bytes_per_s)->default_value(64 * 1024, "65536"),
       "an interactive instance is in use at these bytes per second in and out of its network")
      ("idle-disk-bytes-per-s", po::value(&idle_disk_bytes_per_s)->default_value(64 * 1024, "65536"),
       "an interactive instance is in use writing these bytes per second to disk")
      ("billing-interval-s", po::value(&billing_interval_s)->default_value(60),
       "charge attempts holding GPUs at least this often (and when they release them); a "
       "tenant near the end of its credit is charged and checked every tick")
      ("checkpoint-poll-s", po::value(&checkpoint_poll_s)->default_value(30),
       "read running jobs' newest committed checkpoint this often (0: never)")
      ("checkpoint-upload-wait-s", po::value(&checkpoint_upload_wait_s)->default_value(600),
       "a requeued job waits at most this long for a newer checkpoint its ranks handed off "
       "to the node checkpoint service to commit or fail")
      ("volume-store-wait-s", po::value(&volume_store_wait_s)->default_value(600),
       "a requeued job waits at most this long for its ended attempt's read-write volumes "
       "to be stored back")
      ("snapshot-keep", po::value(&snapshot_keep)->default_value(5),
       "instance snapshots each tenant keeps (reclaimed interactive jobs'); the oldest go, with their data")
      ("snapshot-max-bytes", po::value(&snapshot_max_bytes)->default_value(kDefaultWorkdirMaxBytes),
       "the most one rank's work folder may take in an instance snapshot")
      ("notebook-listen", po::value(&notebook_listen),
       "HOST:PORT to serve notebooks on, over HTTPS with the coordinator's certificate "
       "(/notebook-login, /notebook/<job>/; empty: none; needs --tls-dir)")
      ("http-listen", po::value(&http_listen)->default_value(""),
       "HOST:PORT to serve /metrics, the dashboard and its JSON API on (empty: none)")
      ("chartjs-dir", po::value(&chartjs_dir)->default_value("/usr/share/javascript/chart.js"),
       "folder holding chart.min.js (Debian: libjs-chart.js) for the dashboard")
      ("no-metrics", po::bool_switch(&no_metrics),
       "no metrics, telemetry or cluster view (and so no --http-listen)")
      ("log-level", po::value(&log_level)->default_value("info"), "debug, info, warning, error");
  AddSecurityFlags(desc, &security_flags);
  HangFlags hang_flags;
  AddHangFlags(&desc, &hang_flags);
  ParsedCommandLine cmd;
  absl::Status s = ParseOptions(argc, argv, desc,
                                "usage: athanor-coordinator --state PATH [--listen HOST:PORT] ...",
                                &cmd);
  if (!s.ok()) {
    std::cerr << "athanor-coordinator: " << s.message() << "\n";
    return 2;
  }
  if (cmd.help) return 0;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level)) {
    std::cerr << "athanor-coordinator: --log-level: unknown level '" << log_level << "'\n";
    return 2;
  }
  SetMinLogLevel(level);
  std::string host;
  int port = 0;
  StateOptions options;
  std::vector<std::string> range = absl::StrSplit(port_range, '-');
  if (range.size() != 2 || !absl::SimpleAtoi(range[0], &options.master_port_min) ||
      !absl::SimpleAtoi(range[1], &options.master_port_max) || options.master_port_min < 1 ||
      options.master_port_max > 65535 || options.master_port_min > options.master_port_max) {
    std::cerr << "athanor-coordinator: --master-port-range: expected MIN-MAX within 1..65535\n";
    return 2;
  }
  if (!job_network.empty()) {
    if (absl::Status s = ParseJobNetwork(job_network).status(); !s.ok()) {
      std::cerr << "athanor-coordinator: " << s.message() << "\n";
      return 2;
    }
    options.job_network = job_network;
  }
  if (heartbeat_timeout_s <= 0 || heartbeat_interval_ms <= 0 || kill_after_ms < 0) {
    std::cerr << "athanor-coordinator: heartbeat and kill delays must be positive\n";
    return 2;
  }
  if (!(max_heartbeats_per_s >= 0)) {
    std::cerr << "athanor-coordinator: --max-heartbeats-per-s must be 0 (a fixed interval) or a "
                 "positive rate\n";
    return 2;
  }
  if (default_grace_s < 0 || min_run_time_s < 0 || age_limit_s < 0 || las_recall_after_s < 0 ||
      idle_reclaim_grace_s < 0 || checkpoint_poll_s < 0 ||
      checkpoint_upload_wait_s < 0 || volume_store_wait_s < 0 || billing_interval_s <= 0 || snapshot_keep < 1 ||
      snapshot_max_bytes < 1) {
    std::cerr << "athanor-coordinator: grace, run time, age limit, recall and poll periods must be >= 0, and "
                 "--billing-interval-s, --snapshot-keep and --snapshot-max-bytes > 0\n";
    return 2;
  }
  for (const std::string& q : quotas) {
    std::pair<std::string, std::string> kv = absl::StrSplit(q, absl::MaxSplits('=', 1));
    int32_t gpus = 0;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &gpus) || gpus < 0) {
      std::cerr << "athanor-coordinator: --quota: expected TENANT=GPUS, got '" << q << "'\n";
      return 2;
    }
    options.quotas[kv.first] = gpus;
  }
  options.default_grace = Seconds(default_grace_s);
  options.min_run_time = Seconds(min_run_time_s);
  options.age_limit = Seconds(age_limit_s);
  options.backfill = !no_backfill;
  options.keep_head = keep_head;
  options.strict_fair_share = strict_fair_share;
  options.las_recall_after = Seconds(las_recall_after_s);
  const std::optional<sched::SchedulingPolicy> policy =
      sched::ParseSchedulingPolicy(scheduling_policy);
  if (!policy || *policy == sched::SchedulingPolicy::kFifo) {
    std::cerr << "athanor-coordinator: --scheduling-policy: expected default or las, got '"
              << scheduling_policy << "'\n";
    return 2;
  }
  options.scheduling_policy = *policy;
  if (!(idle_cpu_fraction > 0) || !(idle_net_bytes_per_s > 0) || !(idle_disk_bytes_per_s > 0)) {
    std::cerr << "athanor-coordinator: --idle-cpu-fraction, --idle-net-bytes-per-s and "
                 "--idle-disk-bytes-per-s must be > 0\n";
    return 2;
  }
  options.idle_reclaim_grace = Seconds(idle_reclaim_grace_s);
  options.idle_cpu_fraction = idle_cpu_fraction;
  options.idle_net_bytes_per_s = idle_net_bytes_per_s;
  options.idle_disk_bytes_per_s = idle_disk_bytes_per_s;
  options.checkpoint_upload_wait = Seconds(checkpoint_upload_wait_s);
  options.volume_store_wait = Seconds(volume_store_wait_s);
  options.snapshot_keep = snapshot_keep;
  options.billing_interval = Seconds(billing_interval_s);
  options.heartbeat_timeout = Seconds(heartbeat_timeout_s);
  HeartbeatPace pace(Millis(heartbeat_interval_ms), options.heartbeat_timeout, max_heartbeats_per_s);
  options.heartbeat_pace = &pace;
  options.kill_after_ms = kill_after_ms;
  if (absl::Status bad = ApplyHangFlags(hang_flags, &options.hangs); !bad.ok()) {
    std::cerr << "athanor-coordinator: " << bad.message() << "\n";
    return 2;
  }
  options.coordinator_address = advertise.empty() ? listen : advertise;
  options.schedule_inline = false;  // passes from the core's loop, shared by a burst of changes

  // The state: a SQLite file beside which tokens, secrets and blobs live, or
  // etcd, with those in --local-dir.
  const bool on_etcd = absl::StartsWith(state_path, "etcd://");
  std::optional<etcd::EtcdUri> etcd_uri;
  std::string local_db = state_path;  // tokens and tenants' credentials (SQLite)
  std::string local_base;             // the default data store's parent folder
  if (on_etcd) {
    absl::StatusOr<etcd::EtcdUri> uri = etcd::ParseEtcdUri(state_path);
    if (!uri.ok()) {
      std::cerr << "athanor-coordinator: --state: " << uri.status().message() << "\n";
      return 2;
    }
    etcd_uri = std::move(*uri);
    if (state_flags.local_dir.empty()) {
      std::cerr << "athanor-coordinator: --state etcd://... needs --local-dir (this coordinator's tokens, "
                   "credentials and default data store)\n";
      return 2;
    }
    if (state_flags.lease_ttl_s < 1 || state_flags.lease_ttl_s > 3600) {
      std::cerr << "athanor-coordinator: --etcd-lease-ttl-s must be within 1..3600\n";
      return 2;
    }
    if (state_flags.max_txn_ops < 2) {
      std::cerr << "athanor-coordinator: --etcd-max-txn-ops must be at least 2\n";
      return 2;
    }
    const std::string host = options.coordinator_address.substr(0, options.coordinator_address.rfind(':'));
    if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
      std::cerr << "athanor-coordinator: with etcd, --advertise HOST:PORT must name this coordinator as "
                   "clients dial it (--listen " << listen << " is a wildcard)\n";
      return 2;
    }
    std::error_code ec;
    std::filesystem::create_directories(state_flags.local_dir, ec);
    if (ec) {
      std::cerr << "athanor-coordinator: --local-dir " << state_flags.local_dir << ": " << ec.message() << "\n";
      return 2;
    }
    std::filesystem::permissions(state_flags.local_dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
    local_base = std::filesystem::absolute(state_flags.local_dir, ec).string();
    local_db = local_base + "/local.db";
  } else {
    if (!state_flags.local_dir.empty() || !state_flags.tls.ca_file.empty() || !state_flags.tls.cert_file.empty() ||
        !state_flags.tls.key_file.empty()) {
      std::cerr << "athanor-coordinator: --local-dir and --etcd-* go with --state etcd://...\n";
      return 2;
    }
    std::error_code ec;
    local_base = std::filesystem::absolute(state_path, ec).parent_path().string();
  }

  // Lock-order checking records a graph edge on every contended lock: a
  // debugging aid, not for the hot path of a production process.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Signals are taken by a dedicated thread via sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // SIGTERM/SIGINT end a standby's campaign as well as a leader's service.
  // Static: the detached thread may outlive Run's frame on an early return.
  static absl::Notification stop;
  static std::atomic<int> stop_signal{0};
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    stop_signal = sig;
    stop.Notify();
  }).detach();
  RegisterBuiltinObjectStores();
  if (data_store_uri.empty()) data_store_uri = "file://" + (std::filesystem::path(local_base) / "data").string();
  if (volume_quota.max_bytes <= 0 || volume_quota.max_count <= 0) {
    std::cerr << "athanor-coordinator: --volume-quota-bytes and --volume-quota-count must be positive\n";
    return 2;
  }
  if (image_max_bytes <= 0) {
    std::cerr << "athanor-coordinator: --image-max-bytes must be positive\n";
    return 2;
  }
  // Images' content (and volumes'), through the checkpoints' store factory.
  absl::StatusOr<std::unique_ptr<ObjectStore>> data_store = OpenObjectStore(data_store_uri);
  if (!data_store.ok()) {
    std::cerr << "athanor-coordinator: --data-store " << data_store_uri << ": "
              << data_store.status().message() << "\n";
    return 2;
  }

  absl::StatusOr<std::unique_ptr<CoordinatorSecurity>> security =
      CoordinatorSecurity::Create(security_flags, listen, local_db, RealClock::Get());
  if (!security.ok()) {
    std::cerr << "athanor-coordinator: " << security.status().message() << "\n";
    return 2;
  }
  if (!http_listen.empty() && (*security)->tls() == nullptr && !security::IsLoopbackListen(http_listen)) {
    std::cerr << "athanor-coordinator: --insecure: plaintext --http-listen " << http_listen
              << " refused (loopback only; HTTPS comes with --tls-dir)\n";
    return 2;
  }
  if (no_metrics && !http_listen.empty()) {
    std::cerr << "athanor-coordinator: --http-listen needs metrics (drop --no-metrics)\n";
    return 2;
  }
  std::unique_ptr<TelemetryStore> telemetry;
  std::unique_ptr<CoordinatorMetrics> metrics;
  if (!no_metrics) {
    telemetry = std::make_unique<TelemetryStore>();
    metrics = std::make_unique<CoordinatorMetrics>(telemetry.get());
  }
  // On etcd, nothing below runs before this process leads: a standby has no
  // core (no scheduler, timers or hang detection); it only names the leader
  // to whoever calls it.
  std::unique_ptr<EtcdLeadership> lead;
  std::unique_ptr<Store> store;
  CoordinatorService::StateStatusFn state_status;
  // Until the leader's server listens: gRPC binds with SO_REUSEPORT, so both
  // hold the port for a moment and no client is ever refused.
  std::unique_ptr<StandbyServer> standby;
  if (on_etcd) {
    absl::StatusOr<std::unique_ptr<StandbyServer>> started =
        StandbyServer::Start(listen, (*security)->server_credentials(), nullptr);
    if (!started.ok()) {
      ATHANOR_LOG(ERROR) << started.status();
      return 1;
    }
    standby = std::move(*started);
    absl::StatusOr<std::unique_ptr<EtcdLeadership>> led =
        Lead(*etcd_uri, state_flags, options.coordinator_address, standby.get(), &stop);
    if (!led.ok()) {
      ATHANOR_LOG(ERROR) << "cannot campaign on " << state_path << ": " << led.status();
      return 1;
    }
    if (*led == nullptr) {
      ATHANOR_LOG(INFO) << "signal " << stop_signal.load() << ": stopped while standing by";
      return 0;
    }
    lead = std::move(*led);
    store = std::make_unique<etcd::EtcdStore>(
        lead->client.get(), etcd::EtcdStore::Options{.prefix = etcd_uri->prefix,
                                                     .fence = lead->election->Fence(),
                                                     .max_txn_ops = state_flags.max_txn_ops,
                                                     .on_fenced = [] { ExitLostLead("fenced: another coordinator leads"); }});
    state_status = [l = lead.get()](rpc::StateStatusResponse* r) { return l->Report(r); };
    if (metrics) metrics->SetLeadership(lead->election->term(), lead->led_since_unix, lead->terms);
  } else {
    absl::StatusOr<std::unique_ptr<SqliteStore>> sqlite = SqliteStore::Open(state_path);
    if (!sqlite.ok()) {
      ATHANOR_LOG(ERROR) << "cannot open the state " << state_path << ": " << sqlite.status();
      return 1;
    }
    store = std::move(*sqlite);
    state_status = [state_path, self = options.coordinator_address](rpc::StateStatusResponse* r) {
      r->set_backend("sqlite");
      r->set_location(state_path);
      r->set_self(self);
      return absl::OkStatus();
    };
  }
  absl::StatusOr<std::unique_ptr<CoordinatorCore>> core =
      CoordinatorCore::Create(options, std::move(store), RealClock::Get(), Millis(200),
                              Seconds(checkpoint_poll_s), metrics.get());
  if (!core.ok()) {
    ATHANOR_LOG(ERROR) << "cannot start: " << core.status();
    return 1;
  }
  if (const char* crash = getenv("ATHANOR_TEST_CRASH_BEFORE_COMMIT"); crash != nullptr && *crash) {
    // Fault injection for tests: die between "every shard durable" and COMMIT.
    (*core)->checkpoint_committer()->set_before_commit([](const std::string& job, int64_t step) {
      std::string line = absl::StrCat("athanor-coordinator: test crash before the COMMIT of step ",
                                      step, " of ", job, "\n");
      (void)!write(STDERR_FILENO, line.data(), line.size());
      kill(getpid(), SIGKILL);
    });
  }
  CoordinatorService coordinator_service(core->get(), (*security)->service_security(), std::move(state_status));
  BillingService billing_service(core->get(), (*security)->authorizer());
  AgentService agent_service(core->get(), (*security)->authorizer(), (*security)->secrets(),
                             &pace, telemetry.get());
  // The checkpoint poller reads a tenant's store with that tenant's credentials only.
  (*core)->SetStoreUriResolver([secrets = (*security)->secrets()](const std::string& tenant,
                                                                  const std::string& uri) {
    return secrets->UriForTenant(tenant, uri);
  });
  // Its health says it leads (common/coordinator_targets.h): a list's
  // channel sends calls only here.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // The CLI's synchronous calls get a bounded pool; agents' calls and
  // submissions take no thread while they wait (callback API).
  grpc::ResourceQuota quota("athanor-coordinator");
  quota.SetMaxThreads(kMaxRpcThreads);
  builder.SetResourceQuota(quota);
  // No server-side timer per call: clients cancel their own calls at their
  // deadlines, and the long polls, the only calls held here, end on the
  // coordinator's own timer. Debian's libgrpc keeps every pending timer in a
  // checked table, and with 10,000 agents parked that cost about 8% of the
  // coordinator's CPU (docs/benchmarks.md, "Coordinator at fleet scale").
  builder.AddChannelArgument(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
  builder.AddListeningPort(listen, (*security)->server_credentials(), &port);
  builder.RegisterService(&coordinator_service);
  builder.RegisterService(&billing_service);
  builder.RegisterService(&agent_service);
  builder.RegisterService((*security)->security_service());
  CheckpointCommitService checkpoint_commit_service(core->get(), (*security)->authorizer());
  builder.RegisterService(&checkpoint_commit_service);
  ImagesService images_service(core->get(), (*security)->authorizer(), data_store->get(), image_max_bytes);
  builder.RegisterService(&images_service);
  NodeDataService node_data_service(core->get(), (*security)->authorizer(), data_store->get());
  builder.RegisterService(&node_data_service);
  WorkdirDataService workdir_data_service(core->get(), (*security)->authorizer(), data_store->get(),
                                          snapshot_max_bytes);
  builder.RegisterService(&workdir_data_service);
  // What a crash left between a volume's new blob and its commit goes now,
  // before any agent can store (docs/operations.md, "Volumes").
  if (absl::StatusOr<int> swept = SweepVolumeBlobs(data_store->get(), CoreVolumes(core->get()).List(""));
      !swept.ok()) {
    ATHANOR_LOG(WARNING) << "volumes: cannot sweep unreferenced blobs of " << (*data_store)->Describe() << ": "
                         << swept.status();
  } else if (*swept > 0) {
    ATHANOR_LOG(INFO) << "volumes: deleted " << *swept << " unreferenced blob(s) of " << (*data_store)->Describe();
  }
  VolumesService volumes_service(core->get(), (*security)->authorizer(), (*security)->tokens(), data_store->get(),
                                 volume_quota);
  builder.RegisterService(&volumes_service);
  InteractiveService interactive_service({.core = core->get(),
                                          .auth = (*security)->authorizer(),
                                          .tokens = (*security)->tokens(),
                                          .agent_tls = (*security)->service_security().agent_tls,
                                          .data = data_store->get()});
  builder.RegisterService(&interactive_service);
  std::unique_ptr<ObservabilityService> observability;
  if (metrics) {
    observability = std::make_unique<ObservabilityService>(metrics.get(), (*security)->authorizer());
    builder.RegisterService(observability.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(RpcMetricsInterceptor(metrics.get()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    ATHANOR_LOG(ERROR) << "cannot listen on " << listen;
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(kLeaderHealthService, true);
  standby.reset();  // its connections close; clients reconnect to this server
  ATHANOR_LOG(INFO) << "athanor-coordinator serving on " << listen << " (port " << port
                    << "), state " << state_path;
  std::unique_ptr<security::HttpEndpoint> http;
  if (!http_listen.empty()) {
    DashboardOptions dashboard;
    dashboard.listen = http_listen;
    dashboard.authenticator = (*security)->http_authenticator();
    dashboard.tls = (*security)->tls();
    // The job page reads jobs and logs through this process's own gRPC API.
    dashboard.grpc_target = DashboardRpc::SelfTarget(listen, port);
    if (dashboard.tls != nullptr) dashboard.grpc_ca_pem = dashboard.tls->ca_pem;
    if (size_t colon = notebook_listen.rfind(':'); colon != std::string::npos) {
      dashboard.notebook_port = std::atoi(notebook_listen.c_str() + colon + 1);  // checked by the proxy
    }
    absl::StatusOr<std::unique_ptr<security::HttpEndpoint>> started = StartDashboard(dashboard, metrics.get());
    if (!started.ok()) {
      ATHANOR_LOG(ERROR) << "--http-listen: " << started.status();
      (*core)->Shutdown();
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      return 1;
    }
    http = std::move(*started);
    ATHANOR_LOG(INFO) << "serving /metrics and the dashboard on " << http->scheme() << "://" << http_listen;
  }
  std::unique_ptr<NotebookProxy> notebook_proxy;
  if (!notebook_listen.empty()) {
    if ((*security)->tls() == nullptr) {
      ATHANOR_LOG(ERROR) << "--notebook-listen needs TLS (--tls-dir): notebooks are served over HTTPS only";
      (*core)->Shutdown();
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      return 1;
    }
    absl::StatusOr<std::unique_ptr<NotebookProxy>> started =
        NotebookProxy::Start({.listen = notebook_listen,
                              .tls = *(*security)->tls(),
                              .agent_tls = (*security)->service_security().agent_tls,
                              .authenticator = (*security)->http_authenticator(),
                              .core = core->get()});
    if (!started.ok()) {
      ATHANOR_LOG(ERROR) << started.status();
      (*core)->Shutdown();
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      return 1;
    }
    notebook_proxy = std::move(*started);
    ATHANOR_LOG(INFO) << "serving notebooks on https://" << notebook_listen << " (port " << notebook_proxy->port()
                      << ")";
  }
  stop.WaitForNotification();
  ATHANOR_LOG(INFO) << "signal " << stop_signal.load() << ": shutting down";
  http.reset();
  notebook_proxy.reset();
  (*core)->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  return 0;
}

}  // namespace
}  // namespace athanor::coord

int main(int argc, char** argv) { return athanor::coord::Run(argc, argv); }
