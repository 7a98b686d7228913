#include "worker/agent/telemetry_hub.h"
#include "worker/agent/rank_supervisor.h"

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
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/agent/orphans.h"
#include "worker/agent/proc_stats.h"
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

// Appends `text` to the rank log at `path`, never through a link (best effort:
// the reason also reaches the coordinator in the rank's report).
void AppendToLog(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (fd < 0) return;
  ssize_t written = write(fd, text.data(), text.size());
  (void)written;  // a rank log that cannot take the line loses only this copy of it
  close(fd);
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

void RankSupervisor::StartLocked(const RankTarget& target, const std::vector<RankTarget>& desired) {
  Rank& r = ranks_[target.key];
  r.report.key = target.key;
  absl::StatusOr<std::string> log = LogPath(work_dir_, target.key);
  bool log_dir = false;  // whether the rank's log folder exists, so the reason can go there too
  auto fail = [&](const std::string& why) {
    r.report.phase = RankPhase::kFailedToStart;
    r.report.exit_code = 127;
    r.report.message = why;
    ATHANOR_LOG(WARNING) << "job " << target.key.job_id << " rank " << target.key.rank
                         << " failed to start: " << why;
    if (log_dir) AppendToLog(*log, absl::StrCat("athanor-agent: the rank failed to start: ", why, "\n"));
  };
  if (!log.ok()) return fail(std::string(log.status().message()));
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(*log).parent_path(), ec);
  if (ec) return fail(absl::StrCat("cannot create log directory for ", *log, ": ", ec.message()));
  log_dir = true;
  SubprocessOptions options;
  options.argv = target.command;
  options.env = target.env;
  options.env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(target.gpu_ids, ",");
  for (const auto& [k, v] : extra_env_) options.env[k] = v;
  if (telemetry_ != nullptr) {
    // Best effort: a rank without the socket trains all the same.
    absl::StatusOr<std::string> socket = telemetry_->SocketFor(target.key.job_id, target.key.attempt);
    if (socket.ok()) {
      options.env["ATHANOR_TELEMETRY_SOCKET"] = *socket;
    } else {
      ATHANOR_LOG(WARNING) << "job " << target.key.job_id << ": no telemetry socket: " << socket.status();
    }
  }
  options.stdout_path = *log;
  options.stderr_path = "=stdout";
  options.new_process_group = true;
  r.log_path = *log;
  if (target.archive_workdir) {
    std::string dir = log->substr(0, log->size() - 4);
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(absl::StrCat("cannot create work dir ", dir, ": ", ec.message()));
    options.working_dir = dir;
    r.dir = dir;
    r.archive_uri = target.archive_uri;
    r.gpu_ids = target.gpu_ids;
  }
  if (sandbox_ != nullptr) {
    JobShare share;
    share.tenant = target.tenant;
    share.memory_mb = target.memory_mb;
    share.cpus = target.cpus;
    for (const RankTarget& t : desired) {  // the job's GPUs on this node
      if (t.key.job_id != target.key.job_id || t.key.attempt != target.key.attempt) continue;
      share.node_gpu_ids.insert(share.node_gpu_ids.end(), t.gpu_ids.begin(), t.gpu_ids.end());
    }
    options.env["ATHANOR_PROGRESS_FILE"] = SandboxedProgressPage(target.key.rank);
    absl::Status s = sandbox_->Wrap(target, share, r.dir, &options);
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
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(options);
  if (!p.ok()) {
    if (sandbox_ != nullptr) sandbox_->Ended(target.key, 0);
    return fail(std::string(p.status().message()));
  }
  r.process = std::move(*p);
  r.report.phase = RankPhase::kRunning;
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
    if (!t.notice.empty() && t.notice != r.notice && !r.log_path.empty()) {
      r.notice = t.notice;
      std::ofstream(r.log_path, std::ios::app) << "athanor: " << t.notice << "\n";
    }
    if (t.capture_stacks && r.report.phase == RankPhase::kRunning && !r.stacks_requested) {
      r.stacks_requested = true;
      captures_.push_back({t.key, r.process->pid(), r.log_path});
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
      if (!r.dir.empty()) archives_.push_back({it->first, r.dir, r.archive_uri});
      it = ranks_.erase(it);  // reported; the coordinator no longer wants it
      continue;
    }
    if (!r.kill_sent) {
      r.process->Signal(SIGKILL).IgnoreError();
      r.kill_sent = true;
    }
    ++it;
  }
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
                      << (r.report.message.empty() ? "" : ": " + r.report.message);
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
  for (const auto& [key, r] : ranks_) {
    out.push_back(r.report);
    if (r.process && r.report.phase == RankPhase::kRunning) out.back().pid = r.process->pid();
    if (!r.dir.empty() && r.report.phase == RankPhase::kRunning) {
      out.back().cpu_seconds = ProcessGroupCpuSeconds(r.process->pid());
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
  r.report.phase = RankPhase::kExited;
  r.report.exit_code = exit.exit_code;
  r.report.signal = exit.signal;
  r.report.signal_from_agent = (exit.signal == SIGKILL && r.kill_sent) ||
                               (exit.signal == SIGTERM && r.term_sent);
  if (sandbox_ != nullptr) r.report.message = sandbox_->Ended(key, exit.signal);
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

void RankSupervisor::EndForeign(pid_t pid) {
  absl::MutexLock lock(&mu_);
  foreign_.erase(pid);
}

}  // namespace athanor::agent
