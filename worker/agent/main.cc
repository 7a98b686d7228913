// athanor-agent: the node agent. Registers this node with the coordinator,
// runs the ranks it is told to, and serves their logs.
//
//   athanor-agent --coordinator HOST:PORT --name NAME --gpus N|auto --work-dir DIR
//                 [--labels k=v,...] [--listen HOST:PORT] [--host ADDR]
//                 [--no-sandbox | --sandbox-uids FIRST-LAST --sandbox-hide PATH ...]
//
// Coordinator traffic is mutual TLS in both directions with this node's
// certificate from --tls-dir (ca.crt, agent-NAME.crt, agent-NAME.key, made by
// `athanor admin ca agent`); --insecure (loopback --listen only) is plaintext.
//
// Ranks run sandboxed (sandbox.h); where that is impossible the agent refuses
// to start and says why, unless --no-sandbox is given.
//
// SIGTERM/SIGINT stop the agent and SIGKILL the ranks it runs.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/builtin_stores.h"
#include "common/coordinator_targets.h"
#include "common/logging.h"
#include "common/options.h"
#include "worker/agent/agent.h"
#include "checkpoint/service/rank_registry.h"
#include "worker/agent/checkpoint_service_supervisor.h"
#include "common/http_server.h"
#include "worker/agent/agent_control_service.h"
#include "worker/agent/agent_interactive_service.h"
#include "worker/agent/image_cache_fetcher.h"
#include "worker/agent/volume_sync.h"
#include "worker/agent/workdir_snapshot.h"
#include "worker/agent/metrics_agent.h"
#include "worker/agent/telemetry_hub.h"
#include "worker/agent/orphans.h"
#include "worker/agent/sandbox.h"
#include "security/http_endpoint.h"
#include "security/tls.h"

namespace athanor::agent {
namespace {

int Fail(const std::string& msg) {
  std::cerr << "athanor-agent: " << msg << "\n";
  return 2;
}

int Run(int argc, char** argv) {
  std::string coordinator, name, gpus_text, work_dir, labels_text, listen, host, log_level;
  std::string health_check, archive_uri, gpu_model;
  bool no_sandbox = false, no_telemetry = false;
  bool insecure = false, no_checkpoint_service = false;
  std::string tls_dir, metrics_listen;
  std::string sandbox_uids, sandbox_uid_map, sandbox_exec, gpu_device_dir, rendezvous_key_file;
  std::vector<std::string> sandbox_hide, sandbox_shared, sandbox_env, net_allow;
  int64_t sandbox_pids_max = 4096;
  int64_t image_cache_bytes = int64_t{64} << 30;
  double health_interval_s = 30;
  int64_t gpu_memory_mb = -1, cpus = -1, memory_mb = -1;
  CheckpointServiceOptions ckpt_service;
  po::options_description desc("athanor-agent options");
  desc.add_options()
      ("coordinator", po::value(&coordinator)->required(),
       "coordinator HOST:PORT, or HOST:PORT,HOST:PORT... for coordinators on etcd (the leader answers)")
      ("name", po::value(&name)->required(), "this node's name (unique in the cluster)")
      ("gpus", po::value(&gpus_text)->default_value("auto"),
       "GPU slots to offer: a number, or 'auto' to count CUDA devices (0 when none)")
      ("work-dir", po::value(&work_dir)->required(),
       "directory for rank logs: DIR/jobs/<job>/attempt-<a>/rank-<r>.log")
      ("labels", po::value(&labels_text)->default_value(""), "node labels, k=v[,k=v...]")
      ("listen", po::value(&listen)->default_value("0.0.0.0:0"),
       "HOST:PORT for the AgentControl service (port 0: pick one)")
      ("host", po::value(&host)->default_value("127.0.0.1"),
       "address ranks on this node are reached at (MASTER_ADDR), also advertised for AgentControl")
      ("health-check", po::value(&health_check)->default_value(""),
       "shell command run every --health-interval; failing drains the node (output = reason)")
      ("health-interval", po::value(&health_interval_s)->default_value(30),
       "seconds between health checks")
      ("archive-uri", po::value(&archive_uri)->default_value(""),
       "object store for interactive allocations' work dirs (default file://WORK_DIR/archive)")
      ("gpu-model", po::value(&gpu_model)->default_value(""), "override the detected GPU model")
      ("gpu-memory-mb", po::value(&gpu_memory_mb)->default_value(-1),
       "override the detected per-GPU memory")
      ("cpus", po::value(&cpus)->default_value(-1), "override the detected CPU count")
      ("memory-mb", po::value(&memory_mb)->default_value(-1), "override the detected RAM")
      ("log-level", po::value(&log_level)->default_value("info"), "debug, info, warning, error")
      ("tls-dir", po::value(&tls_dir)->default_value(""),
       "cluster CA folder with ca.crt and this node's agent-NAME.crt and agent-NAME.key")
      ("insecure", po::bool_switch(&insecure),
       "plaintext to the coordinator and for AgentControl; only with a loopback --listen")
      ("metrics-listen", po::value(&metrics_listen)->default_value(""),
       "HOST:PORT to serve Prometheus /metrics on (empty: none)")
      ("no-telemetry", po::bool_switch(&no_telemetry),
       "no telemetry socket for ranks (ATHANOR_TELEMETRY_SOCKET unset) and no /metrics")
      ("no-sandbox", po::bool_switch(&no_sandbox),
       "run ranks unsandboxed, as the agent's user with its environment (shown in athanor nodes)")
      ("sandbox-uids", po::value(&sandbox_uids)->default_value("200000-265535"),
       "uids for tenants, FIRST-LAST (a tenant's uid: FIRST + hash(tenant) mod the range's size)")
      ("sandbox-uid-map", po::value(&sandbox_uid_map)->default_value(""),
       "explicit tenant uids, tenant=uid[,tenant=uid...] (win over --sandbox-uids)")
      ("sandbox-hide", po::value(&sandbox_hide)->composing(),
       "a path masked in every sandbox (repeatable), e.g. the coordinator's state")
      ("sandbox-shared-dir", po::value(&sandbox_shared)->composing(),
       "a folder writable in every sandbox (repeatable), e.g. a shared scratch file system")
      ("sandbox-env", po::value(&sandbox_env)->composing(),
       "an agent environment variable passed to ranks (repeatable); nothing else is")
      ("sandbox-pids-max", po::value(&sandbox_pids_max)->default_value(4096),
       "processes and threads per job on this node")
      ("net-allow", po::value(&net_allow)->composing(),
       "CIDR[:PORT] that ranks in job networks (the coordinator's --job-network) may reach besides "
       "their peers, masqueraded (repeatable): DNS, the object store")
      ("image-cache-bytes", po::value(&image_cache_bytes)->default_value(int64_t{64} << 30),
       "unpacked bytes of environment images kept in WORK_DIR/images (least recently used go first; "
       "images in use stay)")
      ("sandbox-exec", po::value(&sandbox_exec)->default_value(""),
       "the athanor-sandbox-exec helper (default: beside athanor-agent)")
      ("gpu-device-dir", po::value(&gpu_device_dir)->default_value("/dev"),
       "where GPU device nodes live: nvidia<i>, nvidiactl, nvidia-uvm[-tools]")
      ("checkpoint-service-dir", po::value(&ckpt_service.dir)->default_value(""),
       "the node checkpoint service's socket folder (bound into every sandbox; not under "
       "--work-dir; default WORK_DIR.checkpoint-service beside the work dir); ranks get "
       "ATHANOR_CHECKPOINT_SERVICE")
      ("no-checkpoint-service", po::bool_switch(&no_checkpoint_service),
       "run no checkpoint service: ranks upload their own checkpoints, and a preempted rank "
       "that runs out of grace loses its upload in flight")
      ("checkpoint-staging-dir", po::value(&ckpt_service.staging_dir)->default_value(""),
       "the service's staging areas (default /dev/shm/athanor-checkpoint-NAME-HASH, HASH of "
       "the work dir)")
      ("checkpoint-budget-mb", po::value(&ckpt_service.budget_mb)->default_value(8192),
       "staging memory for all ranks of the node together, MiB")
      ("checkpoint-upload-mbps", po::value(&ckpt_service.upload_mbps)->default_value(0),
       "cap each shard's upload at this many MB/s (0: none)")
      ("rendezvous-key-file", po::value(&rendezvous_key_file)->default_value(""),
       "cluster key (same file on every node): ranks get ATHANOR_RENDEZVOUS_SECRET, an HMAC of "
       "job and attempt, which their TCP store requires");
  ParsedCommandLine cmd;
  absl::Status s = ParseOptions(argc, argv, desc,
                                "usage: athanor-agent --coordinator HOST:PORT --name NAME "
                                "--work-dir DIR [--gpus N|auto] ...",
                                &cmd);
  if (!s.ok()) return Fail(std::string(s.message()));
  if (cmd.help) return 0;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level)) return Fail("--log-level: unknown level " + log_level);
  SetMinLogLevel(level);
  int32_t gpus = -1;
  if (gpus_text != "auto" && (!absl::SimpleAtoi(gpus_text, &gpus) || gpus < 0)) {
    return Fail("--gpus: expected a non-negative number or 'auto', got '" + gpus_text + "'");
  }
  // A list (HOST:PORT,HOST:PORT...) names coordinators on etcd; channels follow the leader.
  if (absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor(coordinator); !t.ok()) {
    return Fail("--coordinator: " + std::string(t.status().message()));
  }
  AgentOptions options;
  options.coordinator = coordinator;
  options.name = name;
  options.host = host;
  options.inventory = DetectInventory(gpus);
  for (absl::string_view kv : absl::StrSplit(labels_text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.first.empty()) return Fail("--labels: expected k=v, got '" + std::string(kv) + "'");
    options.labels[p.first] = p.second;
  }
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) return Fail("--work-dir: cannot create " + work_dir + ": " + ec.message());
  work_dir = std::filesystem::absolute(work_dir).string();
  if (health_interval_s <= 0) return Fail("--health-interval: must be > 0");
  if (no_checkpoint_service && !ckpt_service.dir.empty()) {
    return Fail("--no-checkpoint-service and --checkpoint-service-dir: choose one");
  }
  if (!no_checkpoint_service && ckpt_service.dir.empty()) ckpt_service.dir = work_dir + ".checkpoint-service";
  if (!ckpt_service.dir.empty()) {
    if (ckpt_service.dir[0] != '/' || ckpt_service.dir.find(':') != std::string::npos) {
      return Fail("--checkpoint-service-dir: '" + ckpt_service.dir + "' is not an absolute path without ':'");
    }
    // sockaddr_un holds 108 bytes with the terminating NUL.
    if (ckpt_service.dir.size() + sizeof("/checkpoint.sock") > 108) {
      return Fail("--checkpoint-service-dir: '" + ckpt_service.dir +
                  "' is too long for a unix socket path (at most 91 characters); pass a shorter one");
    }
    if (absl::StartsWith(ckpt_service.dir + "/", work_dir + "/")) {
      return Fail("--checkpoint-service-dir: '" + ckpt_service.dir + "' lies under --work-dir, which ranks never see");
    }
  }
  if (ckpt_service.budget_mb <= 0 || ckpt_service.upload_mbps < 0) {
    return Fail("--checkpoint-budget-mb must be > 0 and --checkpoint-upload-mbps >= 0");
  }
  if (!gpu_model.empty()) options.inventory.gpu_model = gpu_model;
  if (gpu_memory_mb >= 0) options.inventory.gpu_memory_mb = gpu_memory_mb;
  if (cpus >= 0) options.inventory.cpus = static_cast<int32_t>(cpus);
  if (memory_mb >= 0) options.inventory.memory_mb = memory_mb;
  options.work_dir = work_dir;
  options.health_check = health_check;
  options.health_interval = Seconds(health_interval_s);
  options.archive_uri = archive_uri.empty() ? "file://" + work_dir + "/archive" : archive_uri;
  RegisterBuiltinObjectStores();
  SandboxOptions sandbox_options;
  if (!no_sandbox) {
    std::pair<std::string, std::string> range = absl::StrSplit(sandbox_uids, absl::MaxSplits('-', 1));
    uint32_t first = 0, last = 0;
    if (!absl::SimpleAtoi(range.first, &first) || !absl::SimpleAtoi(range.second, &last) || first == 0 ||
        last < first) {
      return Fail("--sandbox-uids: expected FIRST-LAST with 0 < FIRST <= LAST, got '" + sandbox_uids + "'");
    }
    sandbox_options.uid_first = first;
    sandbox_options.uid_count = last - first + 1;
    for (absl::string_view kv : absl::StrSplit(sandbox_uid_map, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      uint32_t uid = 0;
      if (p.first.empty() || !absl::SimpleAtoi(p.second, &uid) || uid == 0) {
        return Fail("--sandbox-uid-map: expected tenant=uid with uid > 0, got '" + std::string(kv) + "'");
      }
      sandbox_options.tenant_uids[p.first] = uid;
    }
    for (std::vector<std::string>* paths : {&sandbox_hide, &sandbox_shared}) {
      for (std::string& p : *paths) {
        if (p.empty() || p[0] != '/' || p.find(':') != std::string::npos) {
          return Fail("--sandbox-hide/--sandbox-shared-dir: '" + p + "' is not an absolute path without ':'");
        }
      }
    }
    if (sandbox_pids_max <= 0) return Fail("--sandbox-pids-max: must be > 0");
    for (const std::string& a : net_allow) {
      absl::StatusOr<NetAllow> allow = ParseNetAllow(a);
      if (!allow.ok()) return Fail(std::string(allow.status().message()));
      sandbox_options.net_allow.push_back(*allow);
    }
    if (!rendezvous_key_file.empty()) {
      std::ifstream in(rendezvous_key_file);
      std::stringstream key;
      key << in.rdbuf();
      sandbox_options.rendezvous_key = std::string(absl::StripAsciiWhitespace(key.str()));
      if (!in || sandbox_options.rendezvous_key.size() < 16) {
        return Fail("--rendezvous-key-file: cannot read at least 16 characters from " + rendezvous_key_file);
      }
    }
    std::error_code self_ec;
    std::string self_dir = std::filesystem::read_symlink("/proc/self/exe", self_ec).parent_path().string();
    sandbox_options.exec_path = sandbox_exec.empty() ? self_dir + "/athanor-sandbox-exec" : sandbox_exec;
    sandbox_options.work_dir = work_dir;
    sandbox_options.node_name = name;
    sandbox_options.hide = sandbox_hide;
    sandbox_options.shared_dirs = sandbox_shared;
    if (!ckpt_service.dir.empty()) sandbox_options.shared_dirs.push_back(ckpt_service.dir);
    sandbox_options.pass_env = sandbox_env;
    sandbox_options.gpu_device_dir = gpu_device_dir;
    sandbox_options.pids_max = sandbox_pids_max;
    sandbox_options.node_memory_mb = options.inventory.memory_mb;
    sandbox_options.node_cpus = options.inventory.cpus;
    sandbox_options.node_gpus = options.inventory.gpus;
  }
  options.sandboxed = !no_sandbox;
  if (insecure) {
    if (!tls_dir.empty()) return Fail("--insecure and --tls-dir: choose one");
    if (!security::IsLoopbackListen(listen)) {
      return Fail("--insecure: refused with --listen " + listen + ", which is not a loopback address");
    }
  } else if (tls_dir.empty()) {
    return Fail("no TLS material: pass --tls-dir DIR (ca.crt, agent-" + name + ".crt, agent-" + name +
                ".key from `athanor admin ca agent`), or --insecure with a loopback --listen");
  } else {
    absl::StatusOr<security::TlsMaterial> tls = security::LoadTlsMaterial(tls_dir, "agent-" + name);
    if (!tls.ok()) return Fail("--tls-dir: " + std::string(tls.status().message()));
    options.tls = std::move(*tls);
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  AgentControlService control(work_dir, /*coordinator_only=*/options.tls.has_value());
  AgentInteractiveService interactive(work_dir, /*coordinator_only=*/options.tls.has_value());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen,
                           options.tls ? security::ServerCredentials(*options.tls, /*require_client_cert=*/true)
                                       : grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&control);
  builder.RegisterService(&interactive);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return Fail("cannot listen on " + listen);
  options.agent_address = absl::StrCat(host, ":", port);
  ATHANOR_LOG(INFO) << "athanor-agent " << name << ": AgentControl on port " << port << ", "
                    << options.inventory.gpus << " GPU(s), work dir " << work_dir;

  // Nothing is assumed from memory: end what a SIGKILLed predecessor left running.
  KillOrphanedRanks(work_dir);
  std::unique_ptr<Sandbox> sandbox;
  if (!no_sandbox) {
    absl::StatusOr<std::unique_ptr<Sandbox>> made = Sandbox::Create(sandbox_options);
    if (!made.ok()) {
      return Fail(absl::StrCat("cannot sandbox ranks on this machine: ", made.status().message(),
                               "; pass --no-sandbox to run them unsandboxed"));
    }
    sandbox = std::move(*made);
    ATHANOR_LOG(INFO) << sandbox->Describe();
  } else {
    ATHANOR_LOG(WARNING) << "--no-sandbox: ranks run as this agent's user, with its environment";
  }
  std::unique_ptr<TelemetryHub> telemetry;
  std::unique_ptr<AgentMetrics> metrics;
  std::unique_ptr<security::HttpEndpoint> http;
  if (!no_telemetry) {
    telemetry = std::make_unique<TelemetryHub>(work_dir);
    metrics = std::make_unique<AgentMetrics>(name);
    if (!metrics_listen.empty()) {
      // HTTPS with this node's certificate; plaintext only with --insecure, on loopback.
      if (!options.tls && !security::IsLoopbackListen(metrics_listen)) {
        return Fail("--insecure: plaintext --metrics-listen " + metrics_listen +
                    " refused (loopback only; HTTPS comes with --tls-dir)");
      }
      AgentMetrics* m = metrics.get();
      absl::StatusOr<std::unique_ptr<security::HttpEndpoint>> started = security::HttpEndpoint::Start(
          metrics_listen, options.tls ? &*options.tls : nullptr, HttpServer::Options{}, [m](HttpServer& server) {
            server.Route("/metrics", [m](const HttpRequest&) {
              return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", m->Scrape(), ""};
            });
          });
      if (!started.ok()) return Fail(absl::StrCat("--metrics-listen: ", started.status().message()));
      http = std::move(*started);
      ATHANOR_LOG(INFO) << "serving /metrics on " << http->scheme() << "://" << metrics_listen;
    }
  } else if (!metrics_listen.empty()) {
    return Fail("--metrics-listen needs telemetry (drop --no-telemetry)");
  }
  // Declared before the supervisor, which unregisters its ranks as it ends them.
  std::unique_ptr<ckptsvc::RankRegistry> registry;
  if (!ckpt_service.dir.empty()) {
    ::mkdir(ckpt_service.dir.c_str(), 0755);
    absl::StatusOr<std::unique_ptr<ckptsvc::RankRegistry>> opened =
        ckptsvc::RankRegistry::Open(CheckpointServiceSupervisor::RegistryDirIn(ckpt_service.dir));
    if (!opened.ok()) return Fail(absl::StrCat("checkpoint service: ", opened.status().message()));
    registry = std::move(*opened);
    // A predecessor's ranks were ended above; so are their registrations.
    if (absl::Status cleared = registry->Clear(); !cleared.ok()) {
      return Fail(absl::StrCat("checkpoint service: ", cleared.message()));
    }
  }
  // Environment images (image_cache.h): only sandboxed ranks run in one.
  std::unique_ptr<ImageCache> images;
  if (sandbox != nullptr) {
    absl::StatusOr<std::unique_ptr<ImageCache>> opened = ImageCache::Open(
        {.dir = work_dir + "/images", .max_bytes = image_cache_bytes},
        MakeCoordinatorImageFetcher(coordinator, options.tls));
    if (!opened.ok()) return Fail(absl::StrCat("image cache: ", opened.status().message()));
    images = std::move(*opened);
  }
  // Tenants' volumes (volume_sync.h): only sandboxed ranks mount them.
  std::unique_ptr<VolumeSync> volumes;
  if (sandbox != nullptr) {
    volumes = std::make_unique<VolumeSync>(work_dir, MakeCoordinatorVolumeTransport(coordinator, options.tls),
                                           [box = sandbox.get()](const std::string& t) { return box->TenantUid(t); });
  }
  // Instance snapshots' work dirs (workdir_snapshot.h): unpacked as the tenant's uid.
  WorkdirSnapshots workdirs(work_dir, MakeCoordinatorWorkdirTransport(coordinator, options.tls),
                            [box = sandbox.get()](const std::string& t) { return box ? box->TenantUid(t) : geteuid(); });
  RankSupervisor supervisor(work_dir, RealClock::Get(), sandbox.get(), telemetry.get());
  supervisor.SetWorkdirSnapshots(&workdirs);
  supervisor.SetImageCache(images.get());
  supervisor.SetVolumeSync(volumes.get());
  supervisor.SetCheckpointRegistry(registry.get());
  interactive.Attach(&supervisor);
  NotebookRanks notebooks(options.sandboxed, absl::Seconds(5));  // tokens, kernels' activity
  interactive.AttachNotebooks(&notebooks);
  std::unique_ptr<CheckpointServiceSupervisor> checkpoint_service;
  if (!ckpt_service.dir.empty()) {
    std::error_code self_ec;
    ckpt_service.exec_path =
        std::filesystem::read_symlink("/proc/self/exe", self_ec).parent_path().string() +
        "/athanor-checkpoint-service";
    if (ckpt_service.staging_dir.empty()) {
      ckpt_service.staging_dir =
          absl::StrCat("/dev/shm/athanor-checkpoint-", name, "-", absl::Hex(std::hash<std::string>{}(work_dir)));
    }
    ckpt_service.log_path = work_dir + "/checkpoint-service.log";
    ckpt_service.stats_path = work_dir + "/checkpoint-service-stats.json";
    ckpt_service.coordinator = coordinator;
    ckpt_service.node = name;
    ckpt_service.tls_dir = tls_dir;
    checkpoint_service = std::make_unique<CheckpointServiceSupervisor>(ckpt_service, &supervisor);
    supervisor.SetExtraRankEnv({{"ATHANOR_CHECKPOINT_SERVICE", checkpoint_service->socket_path()}});
  }
  if (checkpoint_service != nullptr) options.checkpoint_stats_path = ckpt_service.stats_path;
  Agent agent(options, &supervisor, telemetry.get(), metrics.get());
  agent.SetImageCache(images.get());
  agent.SetVolumeSync(volumes.get());
  agent.SetWorkdirSnapshots(&workdirs);
  agent.SetNotebooks(&notebooks);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    ATHANOR_LOG(INFO) << "signal " << sig << ": stopping";
    agent.Stop();
  });
  agent.Run();
  waiter.join();
  if (checkpoint_service != nullptr) checkpoint_service->Stop();  // finishes uploads in flight
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  return 0;
}

}  // namespace
}  // namespace athanor::agent

int main(int argc, char** argv) { return athanor::agent::Run(argc, argv); }
