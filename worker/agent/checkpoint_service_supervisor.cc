#include "worker/agent/checkpoint_service_supervisor.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace athanor::agent {

CheckpointServiceSupervisor::CheckpointServiceSupervisor(CheckpointServiceOptions options,
                                                         RankSupervisor* ranks)
    : options_(std::move(options)), ranks_(ranks) {
  ::mkdir(options_.dir.c_str(), 0755);
  ::chmod(options_.dir.c_str(), 0755);  // sandboxed ranks (tenant uids) reach the socket
  thread_ = std::thread([this] { Loop(); });
}

CheckpointServiceSupervisor::~CheckpointServiceSupervisor() { Stop(); }

void CheckpointServiceSupervisor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (pid_ > 0) ::kill(pid_, SIGTERM);
  }
  if (thread_.joinable()) thread_.join();
  // What the service made, when it holds nothing more (rmdir leaves a folder with files).
  ::unlink(socket_path().c_str());
  ::rmdir(registry_dir().c_str());  // empty once every rank has ended
  ::rmdir(options_.dir.c_str());
  ::rmdir(options_.staging_dir.c_str());
}

void CheckpointServiceSupervisor::Loop() {
  SubprocessOptions opts;
  opts.argv = {options_.exec_path,     "--socket",      socket_path(),
               "--staging-dir",        options_.staging_dir,
               "--registry-dir",       registry_dir(),
               "--budget-mb",          absl::StrCat(options_.budget_mb),
               "--upload-mbps",        absl::StrCat(options_.upload_mbps),
               "--coordinator",        options_.coordinator,
               "--node",               options_.node};
  if (!options_.tls_dir.empty()) opts.argv.insert(opts.argv.end(), {"--tls-dir", options_.tls_dir});
  if (!options_.stats_path.empty()) {
    opts.argv.insert(opts.argv.end(), {"--stats-file", options_.stats_path});
  }
  // An agent that dies (even of SIGKILL) stops its service the graceful way:
  // uploads in flight finish, then it exits, rather than outliving every agent
  // after it on the node.
  opts.parent_death_signal = SIGTERM;
  opts.stdout_path = options_.log_path;
  opts.stderr_path = "=stdout";
  for (;;) {
    std::unique_ptr<Subprocess> service;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      absl::StatusOr<std::unique_ptr<Subprocess>> p = ranks_->StartForeign(opts);
      if (p.ok()) {
        service = std::move(*p);
        pid_ = service->pid();
        ATHANOR_LOG(INFO) << "checkpoint service started (pid " << pid_ << ", socket "
                          << socket_path() << ")";
      } else {
        ATHANOR_LOG(ERROR) << "cannot start the checkpoint service: " << p.status();
      }
    }
    if (service != nullptr) {
      ExitInfo e = service->Wait();
      ranks_->EndForeign(service->pid());
      absl::MutexLock lock(&mu_);
      pid_ = 0;
      if (stop_) return;
      ATHANOR_LOG(WARNING) << "checkpoint service exited (" << e.ToString() << "); restarting";
    }
    // Backoff between starts, cut short by Stop().
    absl::MutexLock lock(&mu_);
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Milliseconds(500))) {
      return;
    }
  }
}

}  // namespace athanor::agent
