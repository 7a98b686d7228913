#include "worker/agent/agent.h"

#include "security/cluster_ca.h"

#include <chrono>
#include <csignal>
#include <optional>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/coordinator_channel.h"
#include "common/escape.h"
#include "common/logging.h"
#include "common/truncate.h"
#include "worker/agent/gpu_util.h"
#include "worker/agent/workdir_archive.h"

namespace athanor::agent {
namespace {

// The coordinator's heartbeat interval when it names a sane one (1 ms to
// 10 min); `current` otherwise (0: the answer names none).
int64_t SaneIntervalMs(int64_t ms, int64_t current) { return ms > 0 && ms <= 600000 ? ms : current; }

rpc::RankPhase ToProto(RankPhase p) {
  switch (p) {
    case RankPhase::kRunning: return rpc::RANK_RUNNING;
    case RankPhase::kExited: return rpc::RANK_EXITED;
    case RankPhase::kFailedToStart: return rpc::RANK_FAILED_TO_START;
  }
  return rpc::RANK_PHASE_UNSPECIFIED;
}

void AddReports(const std::vector<RankStatusReport>& reports,
                google::protobuf::RepeatedPtrField<rpc::RankReport>* out) {
  for (const RankStatusReport& r : reports) {
    rpc::RankReport* p = out->Add();
    p->set_job_id(r.key.job_id);
    p->set_attempt(r.key.attempt);
    p->set_rank(r.key.rank);
    p->set_phase(ToProto(r.phase));
    p->set_exit_code(r.exit_code);
    p->set_signal(r.signal);
    p->set_message(r.message);
    p->set_signal_from_agent(r.signal_from_agent);
    p->set_master_port_taken(r.master_port_taken);
    p->set_cpu_seconds(r.cpu_seconds);
    if (r.gpu_utilization >= 0) {
      p->set_gpu_measured(true);
      p->set_gpu_utilization(r.gpu_utilization);
    }
    ProgressToProto(r.progress, p);
    if (r.activity.measured) {  // cumulative; the coordinator takes differences
      rpc::RankActivity* a = p->mutable_activity();
      a->set_measured(true);
      a->set_net_bytes(r.activity.net_bytes);
      a->set_disk_write_bytes(r.activity.disk_write_bytes);
      a->set_kernels_busy(-1);  // no notebook unless one says otherwise
    }
  }
}

}  // namespace

Agent::Agent(AgentOptions options, RankSupervisor* supervisor, TelemetryHub* telemetry,
             AgentMetrics* metrics)
    : options_(std::move(options)), supervisor_(supervisor), telemetry_(telemetry), metrics_(metrics) {
  // Reconnect quickly after a coordinator restart (gRPC's default backoff
  // grows to two minutes).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      options_.tls ? security::ClientCredentials(*options_.tls, security::kCoordinatorName, "", &args)
                   : grpc::InsecureChannelCredentials();
  // A list of coordinators: the channel follows the one that leads
  // (common/coordinator_targets.h); main checked the list.
  std::string target = options_.coordinator;
  if (absl::StatusOr<std::string> t = CoordinatorDialTarget(options_.coordinator, &args); t.ok()) {
    target = *t;
  } else {
    ATHANOR_LOG(ERROR) << "--coordinator: " << t.status();
  }
  stub_ = rpc::NodeAgent::NewStub(grpc::CreateCustomChannel(target, creds, args));
  reaper_ = std::thread([this] { ReaperLoop(); });
  if (!options_.health_check.empty()) health_ = std::thread([this] { HealthLoop(); });
}

Agent::~Agent() {
  if (images_ != nullptr) images_->SetOnReady(nullptr);  // waits out a call in progress
  if (volumes_ != nullptr) volumes_->SetOnReady(nullptr);  // likewise
  if (workdirs_ != nullptr) workdirs_->SetOnReady(nullptr);  // likewise
  Stop();
  if (health_.joinable()) health_.join();
  supervisor_->KillAll();
  supervisor_->Wake();
  reaper_.join();
}

void Agent::SetImageCache(ImageCache* images) {
  images_ = images;
  if (images_ == nullptr) return;
  images_->SetOnReady([this] {
    absl::MutexLock lock(&mu_);
    exit_pending_ = true;  // converge now: ranks wait for this image
    if (inflight_ != nullptr) inflight_->TryCancel();
  });
}

void Agent::SetWorkdirSnapshots(WorkdirSnapshots* workdirs) {
  workdirs_ = workdirs;
  if (workdirs_ == nullptr) return;
  workdirs_->SetOnReady([this] {
    absl::MutexLock lock(&mu_);
    exit_pending_ = true;  // converge now: a rank waits for its work folder
    if (inflight_ != nullptr) inflight_->TryCancel();
  });
}

void Agent::SetVolumeSync(VolumeSync* volumes) {
  volumes_ = volumes;
  if (volumes_ == nullptr) return;
  volumes_->SetOnReady([this] {
    absl::MutexLock lock(&mu_);
    exit_pending_ = true;  // converge now: ranks wait for these volumes
    if (inflight_ != nullptr) inflight_->TryCancel();
  });
}

void Agent::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  health_wake_.SignalAll();
  if (inflight_ != nullptr) inflight_->TryCancel();
}

void Agent::HealthLoop() {
  for (;;) {
    RunHealthCheck();
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    health_wake_.WaitWithTimeout(&mu_, absl::FromChrono(options_.health_interval));
    if (stop_) return;
  }
}

void Agent::RunHealthCheck() {
  std::string out_path = options_.work_dir + "/health-check.out";
  std::filesystem::remove(out_path);
  SubprocessOptions opts;
  opts.argv = {"/bin/sh", "-c", options_.health_check};
  opts.stdout_path = out_path;
  opts.stderr_path = "=stdout";
  absl::StatusOr<std::unique_ptr<Subprocess>> p = supervisor_->StartForeign(opts);
  bool ok = false;
  std::string message;
  if (!p.ok()) {
    message = absl::StrCat("cannot run the health check: ", p.status().message());
  } else {
    // A check that runs past the interval fails (a hung GPU driver is what
    // health checks are for); its whole process group is killed.
    const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(options_.health_interval);
    std::optional<ExitInfo> e = (*p)->WaitFor(limit);
    const bool timed_out = !e.has_value();
    if (timed_out) {
      (*p)->Signal(SIGKILL).IgnoreError();
      e = (*p)->Wait();
    }
    supervisor_->EndForeign((*p)->pid());
    std::ifstream in(out_path);
    std::stringstream text;
    text << in.rdbuf();
    message = std::string(absl::StripAsciiWhitespace(text.str()));
    ok = !timed_out && e->exit_code == 0 && e->signal == 0;
    if (timed_out) {
      message = absl::StrCat("timed out after ", absl::FormatDuration(absl::FromChrono(limit)),
                             message.empty() ? "" : ": ", message);
    } else if (!ok && message.empty()) {
      message = e->ToString();
    }
  }
  absl::MutexLock lock(&mu_);
  if (ok != health_ok_) {
    if (ok) {
      ATHANOR_LOG(INFO) << "health check passes";
    } else {
      ATHANOR_LOG(WARNING) << "health check fails: " << message;
    }
  }
  health_ok_ = ok;
  health_message_ = ok ? "" : TruncateAtWord(message, 1024);
}

void Agent::MeasureGpus(std::vector<RankStatusReport>* reports) {
  if (!gpus_visible_) return;
  bool wanted = false;
  for (const RankStatusReport& r : *reports) wanted = wanted || !r.gpu_ids.empty();
  if (!wanted) return;
  std::optional<std::map<int, double>> util = SampleGpuUtilization(supervisor_);
  if (!util) return;
  gpus_.utilization = *util;
  gpus_.memory_used_mb = SampleGpuField(supervisor_, "memory.used").value_or(std::map<int, double>{});
  for (RankStatusReport& r : *reports) {
    if (r.gpu_ids.empty()) continue;
    double busiest = 0;
    for (int32_t g : r.gpu_ids) {
      auto it = util->find(g);
      if (it != util->end()) busiest = std::max(busiest, it->second);
    }
    r.gpu_utilization = busiest;
  }
}

void Agent::AddObservations(const std::vector<RankStatusReport>& reports, rpc::HeartbeatRequest* req) {
  for (const auto& [i, util] : gpus_.utilization) {
    rpc::GpuSample* g = req->add_gpus();
    g->set_index(i);
    g->set_utilization(util);
    auto mem = gpus_.memory_used_mb.find(i);
    if (mem != gpus_.memory_used_mb.end()) g->set_memory_used_mb(mem->second);
  }
  if (telemetry_ != nullptr) {
    // Samples taken here and lost with a failed heartbeat are not resent:
    // telemetry is best effort, the next ones follow within a second.
    for (JobSamples& j : telemetry_->Take()) {
      rpc::JobTelemetry* t = req->add_telemetry();
      t->set_job_id(j.job_id);
      t->set_attempt(j.attempt);
      t->set_ranks_reporting(j.ranks_reporting);
      for (const StepSample& s : j.samples) {
        rpc::TelemetrySample* p = t->add_samples();
        p->set_step(s.step);
        p->set_loss(s.loss);
        p->set_tokens_per_s(s.tokens_per_s);
        p->set_step_ms(s.step_ms);
        p->set_comm_wait_share(s.comm_wait_share);
        p->set_loss_scale(s.loss_scale);
        p->set_skipped_steps(s.skipped_steps);
        p->set_ckpt_stall_ms(s.ckpt_stall_ms);
        p->set_unix_ms(s.unix_ms);
        p->set_total_steps(s.total_steps);
        p->set_attempt(j.attempt);
      }
    }
  }
  if (metrics_ != nullptr) {
    std::optional<UploadFigures> by_service;
    if (!options_.checkpoint_stats_path.empty()) {
      absl::StatusOr<ServiceStats> stats = ReadServiceStats(options_.checkpoint_stats_path);
      if (stats.ok()) {
        service_uploads_.Observe(*stats);
      } else if (!absl::IsNotFound(stats.status())) {
        ATHANOR_LOG(WARNING) << "checkpoint service stats: " << stats.status().message();
      }
      by_service = service_uploads_.total();
    }
    if (images_ != nullptr) metrics_->SetImageCache(images_->stats());
    metrics_->SetCheckpointUploads(telemetry_ != nullptr ? telemetry_->rank_uploads() : UploadFigures{},
                                   by_service);
    metrics_->Update(reports, gpus_.utilization.empty() ? nullptr : &gpus_,
                     telemetry_ != nullptr ? telemetry_->Latest()
                                           : std::map<std::pair<std::string, int32_t>, StepSample>{},
                     telemetry_ != nullptr ? telemetry_->dropped() : 0);
  }
}

void Agent::ArchiveRemoved() {
  for (const ArchiveTask& t : supervisor_->TakeArchives()) {
    if (!t.snapshot_key.empty() && workdirs_ != nullptr) {  // a reclaimed instance's (workdir_snapshot.h)
      absl::Status s = workdirs_->Store(t.key, t.dir, t.snapshot_key);
      if (s.ok()) {
        ATHANOR_LOG(INFO) << "stored " << t.dir << " in its instance snapshot as " << t.snapshot_key;
      } else {
        ATHANOR_LOG(WARNING) << "cannot store " << t.dir << " in its instance snapshot (" << t.snapshot_key
                             << "): " << EscapeControls(s.ToString());
      }
    }  // and archived, as every reclaimed rank's work dir
    std::string uri = t.uri.empty() ? options_.archive_uri : t.uri;
    std::string key = absl::StrCat(t.key.job_id, "/workdir/rank-", t.key.rank, ".tar");
    absl::Status s = ArchiveAndRemove(t.dir, uri, key);
    if (s.ok()) {
      ATHANOR_LOG(INFO) << "archived " << t.dir << " to " << EscapeControls(uri) << " as " << key;
    } else {
      ATHANOR_LOG(WARNING) << "cannot archive " << t.dir << " to " << EscapeControls(uri) << ": "
                           << EscapeControls(s.ToString());
    }
  }
}

void Agent::ReaperLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    supervisor_->WaitForChildExit();
    absl::MutexLock lock(&mu_);
    if (supervisor_->Reap()) {
      exit_pending_ = true;
      if (inflight_ != nullptr) inflight_->TryCancel();  // report it now
    }
  }
}

void Agent::Backoff() {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Milliseconds(500));
}

bool Agent::Register() {
  rpc::RegisterNodeRequest req;
  req.set_name(options_.name);
  req.set_agent_address(options_.agent_address);
  req.set_host(options_.host);
  rpc::NodeInventory* inv = req.mutable_inventory();
  inv->set_gpus(options_.inventory.gpus);
  inv->set_gpu_model(options_.inventory.gpu_model);
  inv->set_gpu_memory_mb(options_.inventory.gpu_memory_mb);
  inv->set_cpus(options_.inventory.cpus);
  inv->set_memory_mb(options_.inventory.memory_mb);
  for (const auto& [k, v] : options_.labels) (*inv->mutable_labels())[k] = v;
  AddReports(supervisor_->Reports(), req.mutable_ranks());
  req.set_unsandboxed(!options_.sandboxed);
  rpc::RegisterNodeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status s = stub_->RegisterNode(&ctx, req, &resp);
  if (!s.ok()) {
    ATHANOR_LOG(WARNING) << "register with " << options_.coordinator << " failed: "
                         << s.error_message() << " (code " << s.error_code() << "); retrying";
    return false;
  }
  heartbeat_interval_ms_ = SaneIntervalMs(resp.heartbeat_interval_ms(), 1000);
  known_generation_ = 0;
  ATHANOR_LOG(INFO) << "registered as " << options_.name << " with " << options_.coordinator
                    << " (" << options_.inventory.gpus << " GPUs)";
  return true;
}

void Agent::Run() {
  bool registered = false;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    if (!registered) {
      registered = Register();
      if (!registered) Backoff();
      continue;
    }
    grpc::ClientContext ctx;
    rpc::HeartbeatRequest req;
    req.set_node(options_.name);
    req.set_known_generation(known_generation_);
    std::vector<RankStatusReport> reports = supervisor_->Reports();
    gpus_ = GpuReadings();
    MeasureGpus(&reports);
    AddObservations(reports, &req);
    {
      absl::MutexLock lock(&mu_);
      req.set_health_ok(health_ok_);
      req.set_health_message(health_message_);
    }
    if (images_ != nullptr) {
      for (const std::string& d : images_->CachedDigests()) req.add_cached_images(d);
    }
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      AddReports(reports, req.mutable_ranks());
      if (notebooks_ != nullptr) {  // kernels' activity (notebook_ranks.h)
        notebooks_->NoteReports(reports);
        notebooks_->AddKernelActivity(req.mutable_ranks());
      }
      req.set_max_wait_ms(exit_pending_ ? 0 : static_cast<int32_t>(heartbeat_interval_ms_));
      exit_pending_ = false;
      inflight_ = &ctx;
    }
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(heartbeat_interval_ms_ + 5000));
    rpc::HeartbeatResponse resp;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    {
      absl::MutexLock lock(&mu_);
      inflight_ = nullptr;
    }
    if (s.error_code() == grpc::StatusCode::CANCELLED) continue;  // an exit to report
    if (!s.ok()) {
      ATHANOR_LOG(WARNING) << "heartbeat failed: " << s.error_message() << " (code "
                           << s.error_code() << "); retrying";
      Backoff();
      continue;
    }
    if (resp.reregister()) {
      ATHANOR_LOG(INFO) << "coordinator asks this node to register again";
      registered = false;
      continue;
    }
    if (int64_t ms = SaneIntervalMs(resp.heartbeat_interval_ms(), heartbeat_interval_ms_);
        ms != heartbeat_interval_ms_) {
      ATHANOR_LOG(INFO) << "heartbeat interval now " << ms << " ms (the coordinator's pace)";
      heartbeat_interval_ms_ = ms;
    }
    std::vector<RankTarget> desired;
    for (const rpc::RankSpec& d : resp.desired()) {
      RankTarget t;
      t.key = {d.job_id(), d.attempt(), d.rank()};
      t.command.assign(d.command().begin(), d.command().end());
      t.env.insert(d.env().begin(), d.env().end());
      t.gpu_ids.assign(d.gpu_ids().begin(), d.gpu_ids().end());
      t.terminate = d.terminate();
      t.kill_after_ms = d.kill_after_ms();
      t.notice = d.notice();
      t.archive_workdir = d.archive_workdir();
      t.archive_uri = d.archive_uri();
      t.snapshot_key = d.snapshot_key();
      t.restore_key = d.restore_key();
      t.tenant = d.tenant();
      t.memory_mb = d.memory_mb();
      t.cpus = d.cpus();
      t.capture_stacks = d.capture_stacks();
      t.image_digest = d.image_digest();
      for (const rpc::VolumeMount& v : d.volumes()) t.volumes.push_back({v.name(), v.path(), v.read_only()});
      if (d.has_network()) {
        JobNetworkSpec& n = t.network.emplace();
        n.address = d.network().address();
        n.prefix_length = d.network().prefix_length();
        for (const rpc::NetworkPeer& p : d.network().peers()) n.peers.push_back({p.address(), p.host()});
      }
      // The notebook's token, through the sandbox's environment file only.
      if (d.notebook() && notebooks_ != nullptr) t.env["JUPYTER_TOKEN"] = notebooks_->TokenFor(t.key);
      desired.push_back(std::move(t));
    }
    if (notebooks_ != nullptr) {
      std::set<RankKey> keep;
      for (const RankTarget& t : desired) {
        if (t.env.count("JUPYTER_TOKEN")) keep.insert(t.key);
      }
      notebooks_->Retain(keep);
    }
    supervisor_->Converge(desired);
    stacks_.TakeNew();  // captured off this loop (stack_capturer.h)
    if (telemetry_ != nullptr) {
      std::set<std::pair<std::string, int32_t>> keep;
      for (const RankTarget& t : desired) keep.emplace(t.key.job_id, t.key.attempt);
      telemetry_->Retain(keep);  // sockets of attempts that left this node go
    }
    ArchiveRemoved();
    supervisor_->EnforceDeadlines();
    known_generation_ = resp.generation();
  }
}

}  // namespace athanor::agent
