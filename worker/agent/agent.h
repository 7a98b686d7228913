// The node agent's control loop: register, long-poll heartbeats, converge.
//
// Run() registers the node (with every rank it still runs, so a restarted
// coordinator can reconcile), then heartbeats: each heartbeat carries every
// rank's phase and returns the desired set, which the RankSupervisor is made
// to match. A reaper thread waits for child exits and cancels the in-flight
// long-poll so exits are reported at once. When the coordinator answers
// `reregister` (it restarted, or forgot the node) the agent registers again.
// RPC failures are retried with a short backoff; the agent never gives up.
//
// With --health-check, a health thread runs the command every interval and
// the result rides on each heartbeat. Work dirs of removed interactive ranks
// are archived to the object store by the heartbeat loop after converging.
//
// Thread model: Run() blocks on the calling thread until Stop() (from any
// thread). The supervisor is not owned.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/athanor.grpc.pb.h"
#include "security/tls.h"
#include "worker/agent/checkpoint_counters.h"
#include "worker/agent/image_cache.h"
#include "worker/agent/inventory.h"
#include "worker/agent/metrics_agent.h"
#include "worker/agent/notebook_ranks.h"
#include "worker/agent/rank_supervisor.h"
#include "worker/agent/stack_capturer.h"
#include "worker/agent/telemetry_hub.h"
#include "worker/agent/volume_sync.h"
#include "worker/agent/workdir_snapshot.h"

namespace athanor::agent {

struct AgentOptions {
  std::string coordinator;    // HOST:PORT
  std::string name;
  std::string host;           // advertised for MASTER_ADDR
  std::string agent_address;  // HOST:PORT of this agent's AgentControl
  Inventory inventory;
  std::map<std::string, std::string> labels;
  std::string work_dir;
  // Run by `sh -c` every health_interval; a non-zero exit (or a run past the
  // interval) fails the check and the coordinator drains the node with its
  // output as the reason. Empty: no health check.
  std::string health_check;
  Duration health_interval = Seconds(30);
  std::string archive_uri;  // default store for interactive work dirs
  bool sandboxed = true;    // false: --no-sandbox, reported at registration
  // Mutual TLS to the coordinator with this node's certificate; nullopt:
  // plaintext (--insecure, loopback only).
  std::optional<security::TlsMaterial> tls;
  // The node checkpoint service's stats file (--stats-file), read for
  // /metrics; empty: no service on this node.
  std::string checkpoint_stats_path;
};

class Agent {
 public:
  // `telemetry` and `metrics` (not owned; null: off) get the training
  // figures forwarded in heartbeats and the node's metrics updated per loop.
  Agent(AgentOptions options, RankSupervisor* supervisor, TelemetryHub* telemetry = nullptr,
        AgentMetrics* metrics = nullptr);
  ~Agent();
  void Run();
  void Stop();
  // The node's image cache (not owned; null: none): its digests ride on each
  // heartbeat (cached_images), its figures on /metrics, and a finished fetch
  // sends the next heartbeat at once so the waiting ranks start. Call before Run.
  void SetImageCache(ImageCache* images);
  // Converges as soon as an attempt's volumes are here (volume_sync.h).
  void SetVolumeSync(VolumeSync* volumes);
  // Stores reclaimed instances' work dirs, converges when a restored one is here (workdir_snapshot.h).
  void SetWorkdirSnapshots(WorkdirSnapshots* workdirs);
  // The node's notebook ranks (not owned; null: none): their tokens go into
  // the ranks' environments, their kernels' activity into the reports.
  void SetNotebooks(NotebookRanks* notebooks) { notebooks_ = notebooks; }

 private:
  bool Register();
  void ReaperLoop();
  rpc::HeartbeatRequest BuildHeartbeat();
  void Backoff();
  void HealthLoop();
  void RunHealthCheck();
  void ArchiveRemoved();
  // Adds nvidia-smi utilisation to measured ranks' reports (real GPUs only).
  void MeasureGpus(std::vector<RankStatusReport>* reports);
  // Telemetry and GPU samples into the heartbeat; the metrics updated.
  void AddObservations(const std::vector<RankStatusReport>& reports, rpc::HeartbeatRequest* req);

  const AgentOptions options_;
  RankSupervisor* const supervisor_;
  ImageCache* images_ = nullptr;
  VolumeSync* volumes_ = nullptr;
  WorkdirSnapshots* workdirs_ = nullptr;
  NotebookRanks* notebooks_ = nullptr;
  TelemetryHub* const telemetry_;
  AgentMetrics* const metrics_;
  // Heartbeat loop only: the newest nvidia-smi readings (empty: not measured).
  GpuReadings gpus_;
  ServiceUploadCounter service_uploads_;  // heartbeat loop only
  std::unique_ptr<rpc::NodeAgent::Stub> stub_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* inflight_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool exit_pending_ ABSL_GUARDED_BY(mu_) = false;  // an exit not yet in a sent heartbeat
  int64_t heartbeat_interval_ms_ = 1000;
  uint64_t known_generation_ = 0;
  std::thread reaper_;
  std::thread health_;
  StackCapturer stacks_{supervisor_, StackCaptureBounds{}};  // hung ranks' stacks, off the heartbeat loop
  const bool gpus_visible_ = options_.inventory.gpus > 0 && options_.inventory.gpu_model != "none";
  absl::CondVar health_wake_;
  bool health_ok_ ABSL_GUARDED_BY(mu_) = true;
  std::string health_message_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::agent
