#include "worker/agent/rank_supervisor.h"
#include "worker/agent/telemetry_hub.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "checkpoint/service/rank_registry.h"
#include "common/escape.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/agent/image_cache.h"
#include "worker/agent/volume_sync.h"
#include "worker/agent/workdir_snapshot.h"
#include "worker/agent/orphans.h"
#include "worker/agent/proc_stats.h"
#include "worker/agent/rank_log.h"
#include "worker/agent/rendezvous_listener.h"
#include "worker/agent/sandbox.h"

namespace athanor::agent {
namespace {

bool SafeFileName(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> RankSupervisor::LogPath(const std::string& work_dir, const RankKey& key) {
  if (!SafeFileName(key.job_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id: '", key.job_id.substr(0, 64), "' is not a valid job id"));
  }
  if (key.attempt < 0 || key.rank < 0) {
    return absl::InvalidArgumentError("attempt/rank: must be >= 0");
  }
  return absl::StrCat(work_dir, "/jobs/", key.job_id, "/attempt-", key.attempt, "/rank-", key.rank,
                      ".log");
}

absl::StatusOr<std::string> RankSupervisor::RankDir(const std::string& work_dir, const RankKey& key) {
  ASSIGN_OR_RETURN(std::string log, LogPath(work_dir, key));
  return log.substr(0, log.size() - 4);  // without ".log"
}

RankSupervisor::RankSupervisor(std::string work_dir, const Clock* clock, Sandbox* sandbox,
                               TelemetryHub* telemetry)
    : work_dir_(std::move(work_dir)), clock_(clock), sandbox_(sandbox), telemetry_(telemetry) {}

RankSupervisor::~RankSupervisor() { KillAll(); }

RankSupervisor::Rendezvous* RankSupervisor::RendezvousLocked(const RankTarget& target,
                                                             const std::vector<RankTarget>& desired) {
  const AttemptKey attempt{target.key.job_id, target.key.attempt};
  auto found = rendezvous_.find(attempt);
  if (found != rendezvous_.end()) return &found->second;
  int here = 0;
  bool rank0_here = false;
  for (const RankTarget& t : desired) {
    if (t.key.job_id != attempt.first || t.key.attempt != attempt.second) continue;
    ++here;
    rank0_here = rank0_here || t.key.rank == 0;
  }
  auto number = [&](const char* name) {
    auto it = target.env.find(name);
    int v = 0;
    return it != target.env.end() && absl::SimpleAtoi(it->second, &v) ? v : 0;
  };
  const int world = number("WORLD_SIZE"), master_port = number("MASTER_PORT");
  if (!rank0_here || world <= 1 || master_port <= 0) return nullptr;
  // In a job network rank 0's store listens in the box's own network
  // namespace, which only the attempt's own ranks share: no other process can
  // squat on its port, so rank 0 binds it itself (a socket bound here would be
  // in the host's namespace, where the attempt's peers never arrive).
  if (target.network) return nullptr;
  // A job whose rank 0 binds MASTER_PORT itself (PyTorch's TCPStore, as
  // init_process_group("env://") starts it): a socket held here, or handed
  // down, would keep it from binding. It only concerns the job's own
  // rendezvous, so the job's environment may ask for it.
  auto own = target.env.find(kRank0BindsMasterPortEnv);
  if (own != target.env.end() && own->second == "1") return nullptr;
  Rendezvous& rv = rendezvous_[attempt];
  auto addr = target.env.find("MASTER_ADDR");
  const std::string master_addr = addr == target.env.end() ? "" : addr->second;
  absl::StatusOr<RendezvousListener> listener = ListenForRendezvous(master_addr, master_port);
  if (!listener.ok() && absl::IsUnavailable(listener.status()) && here == world) {
    // Every rank is here: they can all be told another port.
    listener = ListenForRendezvous(master_addr, 0);
    if (listener.ok()) {
      ATHANOR_LOG(WARNING) << "job " << attempt.first << " attempt " << attempt.second << ": master port "
                           << master_port << " is in use on this node (another process listens there); its "
                           << world << " ranks, all on this node, rendezvous on port " << listener->port
                           << " instead";
    }
  }
  if (!listener.ok()) {
    rv.port_taken = absl::IsUnavailable(listener.status()) && here < world;
    rv.error = absl::StrCat("cannot serve the attempt's rendezvous: ", listener.status().message(),
                            here == world ? "" : "; ranks on other nodes expect the store on that port, so this "
                                                 "attempt cannot rendezvous (its next one gets another port)");
    ATHANOR_LOG(WARNING) << "job " << attempt.first << " attempt " << attempt.second << ": " << rv.error;
    return &rv;
  }
  rv.fd = listener->fd;
  rv.port = listener->port;
  return &rv;
}

void RankSupervisor::DropRendezvousLocked() {
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    auto rank = ranks_.lower_bound(RankKey{it->first.first, it->first.second, 0});
    const bool running_here = rank != ranks_.end() && rank->first.job_id == it->first.first &&
                              rank->first.attempt == it->first.second;
    if (running_here) {
      ++it;
      continue;
    }
    if (it->second.fd >= 0) close(it->second.fd);
    it = rendezvous_.erase(it);
  }
}

void RankSupervisor::StartLocked(const RankTarget& target, const std::vector<RankTarget>& desired) {
  // The job's volumes: synced down before its first rank here starts (volume_sync.h).
  VolumeSync::Lookup volumes;
  const bool mounts = !target.volumes.empty() && volumes_ != nullptr && sandbox_ != nullptr;
  if (mounts) {
    volumes = volumes_->Acquire(target);
    if (volumes.state == VolumeSync::Lookup::kPending) return;
  }
  // The job's image: a rank whose image is still being fetched is not started yet.
  ImageCache::Lookup image;
  if (!target.image_digest.empty() && images_ != nullptr && sandbox_ != nullptr) {
    image = images_->Acquire(target.image_digest);
    if (image.state == ImageCache::Lookup::kPending) return;
  }
  // A restored instance's work dir: unpacked before the rank starts (workdir_snapshot.h).
  WorkdirSnapshots::Lookup restored;
  if (target.archive_workdir && !target.restore_key.empty() && workdirs_ != nullptr) {
    restored = workdirs_->AcquireRestore(target);
    if (restored.state == WorkdirSnapshots::Lookup::kPending) return;
    workdirs_->Forget(target.key);
  }
  Rank& r = ranks_[target.key];
  r.report.key = target.key;
  if (image.state == ImageCache::Lookup::kReady) r.image_pinned = target.image_digest;
  absl::StatusOr<std::string> log = LogPath(work_dir_, target.key);
  int log_fd = -1;  // the rank's log, opened without following links (rank_log.h)
  auto fail = [&](const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (mounts) volumes_->RankEnded(target.key);
    if (!r.image_pinned.empty()) images_->Release(r.image_pinned);
    r.image_pinned.clear();
    r.report.phase = RankPhase::kFailedToStart;
    r.report.exit_code = 127;
    r.report.message = why;
    ATHANOR_LOG(WARNING) << "job " << target.key.job_id << " rank " << target.key.rank
                         << " failed to start: " << EscapeControls(why);
    if (log_fd >= 0) {
      const std::string line = absl::StrCat("athanor-agent: the rank failed to start: ", why, "\n");
      ssize_t written = write(log_fd, line.data(), line.size());
      (void)written;  // a rank log that cannot take the line loses only this copy of it
      close(log_fd);
    }
  };
  if (!log.ok()) return fail(std::string(log.status().message()));
  if (restored.state == WorkdirSnapshots::Lookup::kFailed) return fail(restored.error);
  absl::StatusOr<int> opened = OpenRankLogForAppend(work_dir_, target.key);
  if (!opened.ok()) return fail(absl::StrCat("cannot open the rank's log: ", opened.status().message()));
  log_fd = *opened;
  SubprocessOptions options;
  options.argv = target.command;
  options.env = target.env;
  options.env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(target.gpu_ids, ",");
  for (const auto& [k, v] : extra_env_) options.env[k] = v;
  Rendezvous* rendezvous = RendezvousLocked(target, desired);
  if (rendezvous != nullptr && rendezvous->port > 0) options.env["MASTER_PORT"] = std::to_string(rendezvous->port);
  if (rendezvous != nullptr && !rendezvous->error.empty()) {
    // No rank of the attempt here starts: the others would meet the squatter.
    r.report.master_port_taken = rendezvous->port_taken;
    return fail(rendezvous->error);
  }
  if (rendezvous != nullptr && target.key.rank == 0) {
    if (rendezvous->fd >= 0) {
      options.pass_fds[kRendezvousListenFd] = rendezvous->fd;
      options.env["ATHANOR_RENDEZVOUS_LISTEN_FD"] = std::to_string(kRendezvousListenFd);
    }
  }
  if (telemetry_ != nullptr) {
    // Best effort: a rank without the socket trains all the same.
    absl::StatusOr<std::string> socket = telemetry_->SocketFor(target.key.job_id, target.key.attempt);
    if (socket.ok()) {
      options.env["ATHANOR_TELEMETRY_SOCKET"] = *socket;
    } else {
      ATHANOR_LOG(WARNING) << "job " << target.key.job_id << ": no telemetry socket: " << socket.status();
    }
  }
  options.stdout_fd = log_fd;
  options.stderr_path = "=stdout";
  options.new_process_group = true;
  r.log_path = *log;
  std::error_code ec;
  if (target.archive_workdir) {
    std::string dir = log->substr(0, log->size() - 4);
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(absl::StrCat("cannot create work dir ", dir, ": ", ec.message()));
    options.working_dir = dir;
    r.dir = dir;
    r.archive_uri = target.archive_uri;
    r.snapshot_key = target.snapshot_key;
    r.gpu_ids = target.gpu_ids;
  }
  if (target.network && sandbox_ == nullptr) {
    return fail("the job runs in a job network (the coordinator's --job-network), which needs the sandbox; "
                "this agent runs with --no-sandbox");
  }
  if (!target.image_digest.empty()) {
    if (sandbox_ == nullptr) {
      return fail(absl::StrCat("the job runs in the image ", target.image_digest,
                               ", which needs the sandbox; this agent runs with --no-sandbox"));
    }
    if (images_ == nullptr) return fail(absl::StrCat("the job runs in the image ", target.image_digest, ", and this agent has no image cache"));
    if (image.state == ImageCache::Lookup::kFailed) return fail(absl::StrCat("cannot get the job's image: ", image.error));
  }
  if (!target.volumes.empty()) {
    if (sandbox_ == nullptr) return fail("the job mounts volumes, which need the sandbox; this agent runs with --no-sandbox");
    if (volumes_ == nullptr) return fail("the job mounts volumes, and this agent syncs none");
    if (volumes.state == VolumeSync::Lookup::kFailed) return fail(volumes.error);
  }
  uid_t uid = geteuid();  // unsandboxed ranks run as the agent's user
  if (sandbox_ != nullptr) {
    JobShare share;
    share.tenant = target.tenant;
    share.memory_mb = target.memory_mb;
    share.cpus = target.cpus;
    for (const RankTarget& t : desired) {  // the job's GPUs on this node
      if (t.key.job_id != target.key.job_id || t.key.attempt != target.key.attempt) continue;
      share.node_gpu_ids.insert(share.node_gpu_ids.end(), t.gpu_ids.begin(), t.gpu_ids.end());
    }
    uid = sandbox_->TenantUid(target.tenant.empty() ? "default" : target.tenant);
    options.env["ATHANOR_PROGRESS_FILE"] = SandboxedProgressPage(target.key.rank);
    absl::Status s = sandbox_->Wrap(target, share, r.dir, &options, image.rootfs);
    if (!s.ok()) {
      sandbox_->Ended(target.key, 0);
      return fail(absl::StrCat("cannot sandbox: ", s.message()));
    }
    r.progress_path =
        PlanProgressPage(*log, sandbox_->ShmDir(target.key), target.key.rank).on_host;
  } else {
    ProgressPaths page = PlanProgressPage(*log, "", target.key.rank);
    options.env["ATHANOR_PROGRESS_FILE"] = page.in_rank;
    r.progress_path = page.on_host;
  }
  if (registry_ != nullptr) {
    auto uri = target.env.find("ATHANOR_CHECKPOINT_URI");
    absl::Status registered = registry_->Register(
        {target.key.job_id, target.key.attempt, target.key.rank, uid,
         uri == target.env.end() ? "" : uri->second, /*keep_last=*/0});
    if (!registered.ok()) {
      if (sandbox_ != nullptr) sandbox_->Ended(target.key, 0);
      return fail(absl::StrCat("cannot register the rank with the node's checkpoint service: ",
                               registered.message()));
    }
  }
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(options);
  if (rendezvous != nullptr && target.key.rank == 0 && rendezvous->fd >= 0) {
    close(rendezvous->fd);  // rank 0 holds it now (or failed to start, and the attempt with it)
    rendezvous->fd = -1;
  }
  if (!p.ok()) {
    if (sandbox_ != nullptr) sandbox_->Ended(target.key, 0);
    if (registry_ != nullptr) {
      registry_->Unregister(target.key.job_id, target.key.attempt, target.key.rank).IgnoreError();  // best effort
    }
    return fail(std::string(p.status().message()));
  }
  close(log_fd);
  r.process = std::move(*p);
  r.report.phase = RankPhase::kRunning;
  if (mounts) volumes_->RankStarted(target.key);
  RecordRank(work_dir_, target.key, r.process->pid());
  ATHANOR_LOG(INFO) << "started job " << target.key.job_id << " attempt " << target.key.attempt
                    << " rank " << target.key.rank << " pid " << r.process->pid();
}

void RankSupervisor::Converge(const std::vector<RankTarget>& desired) {
  absl::MutexLock lock(&mu_);
  std::set<RankKey> wanted;
  for (const RankTarget& t : desired) {
    wanted.insert(t.key);
    auto it = ranks_.find(t.key);
    if (it == ranks_.end()) {
      if (!t.terminate) StartLocked(t, desired);  // a rank told to stop is never started
      continue;
    }
    Rank& r = it->second;
    if (!t.snapshot_key.empty()) r.snapshot_key = t.snapshot_key;  // a reclaim's snapshot
    if (!t.notice.empty() && t.notice != r.notice && !r.log_path.empty()) {
      r.notice = t.notice;
      if (notice_listener_) notice_listener_(t.key, t.notice);  // open shells show it too
      absl::Status appended = AppendToRankLog(work_dir_, t.key, absl::StrCat("athanor: ", t.notice, "\n"));
      if (!appended.ok()) {
        ATHANOR_LOG(WARNING) << "job " << t.key.job_id << " rank " << t.key.rank
                             << ": cannot append a notice to its log: " << EscapeControls(appended.message());
      }
    }
    if (t.capture_stacks && r.report.phase == RankPhase::kRunning && !r.stacks_requested) {
      r.stacks_requested = true;
      captures_.push_back({t.key, r.process->pid(), work_dir_});
    }
    if (t.terminate && r.report.phase == RankPhase::kRunning && !r.term_sent) {
      r.process->Signal(SIGTERM).IgnoreError();
      r.term_sent = true;
      r.kill_at = clock_->Now() + Millis(t.kill_after_ms);
    }
  }
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    Rank& r = it->second;
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    if (r.report.phase != RankPhase::kRunning) {
      if (!r.dir.empty()) archives_.push_back({it->first, r.dir, r.archive_uri, r.snapshot_key});
      it = ranks_.erase(it);  // reported; the coordinator no longer wants it
      continue;
    }
    if (!r.kill_sent) {
      r.process->Signal(SIGKILL).IgnoreError();
      r.kill_sent = true;
    }
    ++it;
  }
  DropRendezvousLocked();
}

bool RankSupervisor::Reap() {
  absl::MutexLock lock(&mu_);
  bool changed = false;
  for (auto& [key, r] : ranks_) {
    if (r.report.phase != RankPhase::kRunning) continue;
    std::optional<ExitInfo> exit = r.process->Poll();
    if (!exit) continue;
    // The leader is gone; make sure nothing it started outlives it.
    kill(-r.process->pid(), SIGKILL);
    EndedLocked(key, r, *exit);
    changed = true;
    ATHANOR_LOG(INFO) << "job " << key.job_id << " attempt " << key.attempt << " rank " << key.rank
                      << " " << exit->ToString()
                      << (r.report.message.empty() ? "" : ": " + EscapeControls(r.report.message));
  }
  return changed;
}

void RankSupervisor::EnforceDeadlines() {
  absl::MutexLock lock(&mu_);
  TimePoint now = clock_->Now();
  for (auto& [key, r] : ranks_) {
    if (r.report.phase == RankPhase::kRunning && r.term_sent && !r.kill_sent && now >= r.kill_at) {
      r.process->Signal(SIGKILL).IgnoreError();
      r.kill_sent = true;
    }
  }
}

std::vector<RankStatusReport> RankSupervisor::Reports() {
  absl::MutexLock lock(&mu_);
  std::vector<RankStatusReport> out;
  for (auto& [key, r] : ranks_) {  // not const: each rank's socket tally moves on
    out.push_back(r.report);
    if (r.process && r.report.phase == RankPhase::kRunning) out.back().pid = r.process->pid();
    if (!r.dir.empty() && r.report.phase == RankPhase::kRunning) {
      out.back().cpu_seconds = ProcessGroupCpuSeconds(r.process->pid());
      out.back().activity = SampleBoxActivity(r.process->pid(), "/proc", nullptr, &r.sockets);
      out.back().gpu_ids = r.gpu_ids;
    }
    if (r.report.phase == RankPhase::kRunning && r.process != nullptr) {
      out.back().progress = ReadRankProgress(r.progress_path, r.process->pid());
    }
  }
  return out;
}

void RankSupervisor::StacksCaptured(const RankKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = ranks_.find(key);
  if (it != ranks_.end() && it->second.term_sent) it->second.kill_at = clock_->Now();
}

std::vector<StackCaptureTask> RankSupervisor::TakeStackCaptures() {
  absl::MutexLock lock(&mu_);
  return std::exchange(captures_, {});
}

int RankSupervisor::running_count() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, r] : ranks_) n += r.report.phase == RankPhase::kRunning;
  return n;
}

void RankSupervisor::Wake() {
  absl::MutexLock lock(&mu_);
  ++woken_;
}

void RankSupervisor::WaitForChildExit() {
  {
    absl::MutexLock lock(&mu_);
    int seen = woken_;
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (woken_ != seen) return true;
      for (const auto& [key, r] : ranks_) {
        if (r.report.phase == RankPhase::kRunning) return true;
      }
      return false;
    };
    mu_.Await(absl::Condition(&ready));
    if (woken_ != seen) return;
  }
  siginfo_t info{};
  int rc;
  do {
    rc = waitid(P_ALL, 0, &info, WEXITED | WNOWAIT);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, r] : ranks_) {
    if (r.process && r.process->pid() == info.si_pid) return;  // Reap() takes it
  }
  if (foreign_.count(info.si_pid)) {  // its owner reaps it
    pid_t pid = info.si_pid;
    auto gone = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !foreign_.count(pid); };
    mu_.Await(absl::Condition(&gone));
    return;
  }
  int status;
  waitpid(info.si_pid, &status, WNOHANG);  // some other child of ours
}

void RankSupervisor::KillAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, r] : ranks_) {
    if (r.report.phase != RankPhase::kRunning) continue;
    r.process->Signal(SIGKILL).IgnoreError();
    r.kill_sent = true;
    ExitInfo e = r.process->Wait();
    kill(-r.process->pid(), SIGKILL);
    EndedLocked(key, r, e);
  }
}

void RankSupervisor::EndedLocked(const RankKey& key, Rank& r, const ExitInfo& exit) {
  ForgetRank(work_dir_, key);
  if (registry_ != nullptr) {
    absl::Status s = registry_->Unregister(key.job_id, key.attempt, key.rank);
    if (!s.ok()) ATHANOR_LOG(WARNING) << "job " << key.job_id << " rank " << key.rank << ": " << s.message();
  }
  r.report.phase = RankPhase::kExited;
  r.report.exit_code = exit.exit_code;
  r.report.signal = exit.signal;
  r.report.signal_from_agent = (exit.signal == SIGKILL && r.kill_sent) ||
                               (exit.signal == SIGTERM && r.term_sent);
  if (sandbox_ != nullptr) r.report.message = sandbox_->Ended(key, exit.signal);
  if (volumes_ != nullptr) volumes_->RankEnded(key);  // the box's last: synced up
  if (!r.image_pinned.empty()) images_->Release(r.image_pinned);  // evictable once no rank runs in it
  r.image_pinned.clear();
}

std::vector<ArchiveTask> RankSupervisor::TakeArchives() {
  absl::MutexLock lock(&mu_);
  std::vector<ArchiveTask> out;
  out.swap(archives_);
  return out;
}

absl::StatusOr<std::unique_ptr<Subprocess>> RankSupervisor::StartForeign(
    const SubprocessOptions& options) {
  absl::MutexLock lock(&mu_);  // the reaper checks foreign_ under mu_, after this
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(options));
  foreign_.insert(p->pid());
  return p;
}

void RankSupervisor::SetExtraRankEnv(std::map<std::string, std::string> env) {
  absl::MutexLock lock(&mu_);
  extra_env_ = std::move(env);
}

void RankSupervisor::SetWorkdirSnapshots(WorkdirSnapshots* workdirs) {
  absl::MutexLock lock(&mu_);
  workdirs_ = workdirs;
}

void RankSupervisor::SetVolumeSync(VolumeSync* volumes) {
  absl::MutexLock lock(&mu_);
  volumes_ = volumes;
}

void RankSupervisor::SetImageCache(ImageCache* images) {
  absl::MutexLock lock(&mu_);
  images_ = images;
}

void RankSupervisor::SetCheckpointRegistry(ckptsvc::RankRegistry* registry) {
  absl::MutexLock lock(&mu_);
  registry_ = registry;
}

void RankSupervisor::EndForeign(pid_t pid) {
  absl::MutexLock lock(&mu_);
  foreign_.erase(pid);
}

}  // namespace athanor::agent
