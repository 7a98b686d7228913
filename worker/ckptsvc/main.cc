// athanor-checkpoint-service: the node checkpoint service (docs/architecture.md,
// "Who uploads"), started and supervised by the agent, one per node.
//
//   athanor-checkpoint-service --socket PATH --staging-dir DIR --registry-dir DIR
//       [--budget-mb N] [--budget-per-uid-mb N] [--handoff-timeout-s S]
//       [--stage-wait-timeout-s S] [--max-connections-per-uid N] [--max-connections N]
//       [--upload-mbps N] [--coordinator HOST:PORT --node NAME]
//
// Ranks hand their checkpoint shards to it over the unix socket at --socket,
// and only ranks its agent registered in --registry-dir (root's, 0700;
// checkpoint/service/rank_registry.h) may;
// it uploads them with each job's credentials and reports each durable shard
// to the coordinator, which commits the step. SIGTERM/SIGINT: stop taking
// hand-offs, finish the uploads in flight, exit 0.
#include <signal.h>

#include <iostream>

#include "checkpoint/builtin_stores.h"
#include "checkpoint/service/checkpoint_service.h"
#include "common/escape.h"
#include "common/logging.h"
#include "common/options.h"
#include "security/cluster_ca.h"
#include "security/tls.h"
#include "worker/ckptsvc/coordinator_reporter.h"

namespace athanor::ckptsvc {
namespace {

// Without a coordinator (a standalone node, tests of the service alone).
class LogReporter final : public DurableReporter {
 public:
  absl::Status ShardDurable(const DurableShard& s) override {
    ATHANOR_LOG(INFO) << "durable: " << s.shard_key << " (" << s.shard_size << " bytes, crc32c "
                      << s.shard_crc32c << "); no coordinator to commit it";
    return absl::OkStatus();
  }
};

int Run(int argc, char** argv) {
  CheckpointServiceOptions options;
  std::string coordinator, node, log_level, tls_dir;
  int64_t budget_mb = 8192, uid_budget_mb = 0;
  double upload_mbps = 0, handoff_timeout_s = 300, stage_wait_timeout_s = 600;
  po::options_description desc("athanor-checkpoint-service options");
  desc.add_options()
      ("socket", po::value(&options.socket_path)->required(), "unix socket ranks connect to")
      ("registry-dir", po::value(&options.registry_dir)->required(),
       "the agent's registrations of the ranks it runs (a folder of this user's, 0700); a stage of a rank "
       "not registered there, or disagreeing with its registration, is refused")
      ("staging-dir", po::value(&options.staging_dir)->required(),
       "where staging areas live (tmpfs, e.g. /dev/shm/athanor-checkpoint); emptied at start")
      ("budget-mb", po::value(&budget_mb)->default_value(8192),
       "staging memory of all ranks of the node together, MiB")
      ("budget-per-uid-mb", po::value(&uid_budget_mb)->default_value(0),
       "staging memory one uid's ranks may hold together, MiB (0: the whole --budget-mb)")
      ("handoff-timeout-s", po::value(&handoff_timeout_s)->default_value(300),
       "an area not handed off within this is reclaimed when other ranks wait for budget")
      ("stage-wait-timeout-s", po::value(&stage_wait_timeout_s)->default_value(600),
       "a stage request waits at most this for budget, then is answered 'skip'")
      ("max-connections-per-uid", po::value(&options.max_connections_per_uid)->default_value(64),
       "live rank connections one uid may hold")
      ("max-connections", po::value(&options.max_connections)->default_value(1024),
       "live rank connections of all uids together")
      ("upload-mbps", po::value(&upload_mbps)->default_value(0),
       "cap each shard's upload at this many MB/s (0: none)")
      ("coordinator", po::value(&coordinator)->default_value(""),
       "coordinator HOST:PORT to report durable shards to (empty: log them)")
      ("node", po::value(&node)->default_value(""), "this node's name, as its agent registered")
      ("tls-dir", po::value(&tls_dir)->default_value(""),
       "cluster CA folder with ca.crt and agent-NODE.crt/.key: mutual TLS to the coordinator "
       "(empty: plaintext, for an --insecure coordinator)")
      ("stats-file", po::value(&options.stats_path)->default_value(""),
       "write the upload totals here (JSON, replaced after each upload) for the agent's /metrics")
      ("log-level", po::value(&log_level)->default_value("info"), "debug | info | warning | error");
  ParsedCommandLine cmd;
  absl::Status parsed = ParseOptions(argc, argv, desc,
                                     "usage: athanor-checkpoint-service --socket PATH "
                                     "--staging-dir DIR --registry-dir DIR [options]",
                                     &cmd);
  if (!parsed.ok()) {
    std::cerr << "athanor-checkpoint-service: " << parsed.message() << std::endl;
    return 2;
  }
  if (cmd.help) return 0;
  LogLevel level;
  if (ParseLogLevel(log_level, &level)) SetMinLogLevel(level);
  if (budget_mb <= 0 || uid_budget_mb < 0 || uid_budget_mb > budget_mb || upload_mbps < 0 ||
      !(handoff_timeout_s > 0) || !(stage_wait_timeout_s > 0) ||
      options.max_connections_per_uid <= 0 || options.max_connections <= 0 ||
      (!coordinator.empty() && node.empty())) {
    std::cerr << "athanor-checkpoint-service: --budget-mb must be > 0, --budget-per-uid-mb in [0, "
                 "--budget-mb], --upload-mbps >= 0, the timeouts and connection caps > 0, and "
                 "--coordinator needs --node"
              << std::endl;
    return 2;
  }
  options.budget_bytes = static_cast<uint64_t>(budget_mb) << 20;
  options.uid_budget_bytes = static_cast<uint64_t>(uid_budget_mb) << 20;
  options.handoff_timeout = absl::Seconds(handoff_timeout_s);
  options.stage_wait_timeout = absl::Seconds(stage_wait_timeout_s);
  options.upload_bytes_per_second = static_cast<uint64_t>(upload_mbps * 1e6);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  RegisterBuiltinObjectStores();
  std::unique_ptr<DurableReporter> reporter;
  if (coordinator.empty()) {
    reporter = std::make_unique<LogReporter>();
  } else {
    grpc::ChannelArguments args;
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!tls_dir.empty()) {
      absl::StatusOr<security::TlsMaterial> tls = security::LoadTlsMaterial(tls_dir, "agent-" + node);
      if (!tls.ok()) {
        std::cerr << "athanor-checkpoint-service: --tls-dir: " << tls.status().message() << std::endl;
        return 2;
      }
      credentials = security::ClientCredentials(*tls, security::kCoordinatorName, "", &args);
    }
    reporter = std::make_unique<CoordinatorReporter>(coordinator, node, credentials, args);
  }
  absl::StatusOr<std::unique_ptr<CheckpointService>> service =
      CheckpointService::Start(options, reporter.get(), OpenObjectStoreWithEnv);
  if (!service.ok()) {
    ATHANOR_LOG(ERROR) << "cannot start: " << EscapeControls(service.status().ToString());
    return 1;
  }
  ATHANOR_LOG(INFO) << "athanor-checkpoint-service serving on " << options.socket_path
                    << ", staging in " << options.staging_dir << " (budget " << budget_mb
                    << " MiB)";
  int sig = 0;
  sigwait(&signals, &sig);
  ATHANOR_LOG(INFO) << "signal " << sig << ": finishing uploads in flight";
  service->reset();
  return 0;
}

}  // namespace
}  // namespace athanor::ckptsvc

int main(int argc, char** argv) { return athanor::ckptsvc::Run(argc, argv); }
