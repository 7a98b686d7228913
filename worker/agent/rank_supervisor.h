// RankSupervisor: the processes of the ranks one node agent runs.
//
// Converge() makes the running set match the coordinator's desired set:
// starts missing ranks (own process group, env contract, output appended to
// WORK_DIR/jobs/<job>/attempt-<a>/rank-<r>.log), sends SIGTERM to ranks marked
// terminate and SIGKILL once their kill_after_ms passes (EnforceDeadlines),
// and SIGKILLs ranks no longer desired. An exited rank is remembered and
// reported until it leaves the desired set, so no exit is lost. Each running
// rank is recorded under WORK_DIR/run (see orphans.h) until it is reaped.
//
// With a Sandbox, each rank starts in its job attempt's sandbox (sandbox.h),
// and an OOM kill there is reported as "out of memory".
//
// Rendezvous: for an attempt of more than one rank whose rank 0 runs here,
// the supervisor binds MASTER_PORT and listens before the attempt's first
// rank here starts, and hands the socket to rank 0 (rendezvous_listener.h).
// When another process already listens there and every rank of the attempt
// runs on this node, the attempt's ranks get a free port as MASTER_PORT
// instead; when some rank runs elsewhere (it expects the coordinator's port),
// the attempt's ranks here fail to start saying why, none of them having
// contacted the squatter, and their reports say the port was taken
// (master_port_taken): the coordinator requeues the attempt without using a
// restart and puts its next rank 0 on another node (job_lifecycle.h).
// Nothing counts against the node.
//
// Logs are opened from the work dir without following links (rank_log.h).
// With a checkpoint registry (checkpoint/service/rank_registry.h), each rank
// is registered before it starts and unregistered when it has ended.
//
// Thread-safe (one mutex). WaitForChildExit() blocks and is meant for one
// dedicated reaper thread. The Clock is not owned.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "worker/agent/box_activity.h"
#include "worker/agent/job_network.h"
#include "worker/agent/rank_progress.h"

namespace athanor::agent {

class ImageCache;
class Sandbox;
class VolumeSync;
class WorkdirSnapshots;
class TelemetryHub;
}  // namespace athanor::agent
namespace athanor::ckptsvc {
class RankRegistry;
}  // namespace athanor::ckptsvc
namespace athanor::agent {

struct RankKey {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  bool operator<(const RankKey& o) const {
    return std::tie(job_id, attempt, rank) < std::tie(o.job_id, o.attempt, o.rank);
  }
};

// A volume the rank's sandbox mounts (RankSpec.volumes).
struct VolumeMountTarget {
  std::string name;
  std::string path;  // inside the sandbox
  bool read_only = false;
  bool operator==(const VolumeMountTarget&) const = default;
};

struct RankTarget {
  RankKey key;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::vector<int32_t> gpu_ids;
  bool terminate = false;
  int64_t kill_after_ms = 0;
  std::string notice;            // appended once to the rank's log
  bool archive_workdir = false;  // interactive: own work dir (cwd), archived at removal
  std::string archive_uri;
  // Instance snapshots (workdir_snapshot.h): where the work dir goes when the
  // rank is removed (instead of the archive), and where it comes from first.
  std::string snapshot_key;
  std::string restore_key;
  std::string tenant;     // the sandbox's uid; empty: "default"
  int64_t memory_mb = 0;  // the job's request on this node; 0: its share by GPUs
  int32_t cpus = 0;
  bool capture_stacks = false;  // hang: capture its stacks into its log (once)
  // The job's environment (athanor_data.proto): its image ("" : the node's
  // root filesystem) and its volumes.
  std::string image_digest;
  std::vector<VolumeMountTarget> volumes;
  // The attempt's network (--job-network; job_network.h); none: the node's.
  std::optional<JobNetworkSpec> network;
};

// A hung rank whose stacks the agent loop captures (outside locks).
struct StackCaptureTask {
  RankKey key;
  pid_t leader = 0;
  std::string work_dir;  // the log is reached from here (rank_log.h)
};

// A removed rank's work dir to pack and upload (agent loop, outside locks).
struct ArchiveTask {
  RankKey key;
  std::string dir;
  std::string uri;  // empty: the agent's default
  std::string snapshot_key;  // non-empty: stored in an instance snapshot instead (workdir_snapshot.h)
};

enum class RankPhase { kRunning, kExited, kFailedToStart };

struct RankStatusReport {
  RankKey key;
  RankPhase phase = RankPhase::kRunning;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
  bool signal_from_agent = false;  // `signal` is one this supervisor sent (SIGTERM, SIGKILL)
  // kFailedToStart because another process listens on the attempt's master
  // port here and ranks on other nodes expect it: the platform's fault, not the job's.
  bool master_port_taken = false;
  double cpu_seconds = -1;  // CPU time of the rank's process group (measured ranks)
  std::vector<int32_t> gpu_ids;   // measured ranks: their GPUs
  double gpu_utilization = -1;    // filled by the agent from nvidia-smi; < 0: unknown
  RankProgress progress;          // running ranks: their progress page (rank_progress.h)
  pid_t pid = 0;                  // running ranks: the process (group leader)
  BoxActivity activity;           // measured ranks: network and disk counters (box_activity.h)
};

class RankSupervisor {
 public:
  // `sandbox` (not owned; null: ranks run unsandboxed) confines every rank.
  // `telemetry` (not owned; null: none) names each rank its attempt's
  // telemetry socket (ATHANOR_TELEMETRY_SOCKET).
  RankSupervisor(std::string work_dir, const Clock* clock, Sandbox* sandbox = nullptr,
                 TelemetryHub* telemetry = nullptr);
  ~RankSupervisor();  // SIGKILLs and reaps whatever still runs

  void Converge(const std::vector<RankTarget>& desired);
  // Reaps exited children; true when any rank's phase changed.
  bool Reap();
  // SIGKILLs terminating ranks whose deadline passed.
  void EnforceDeadlines();
  std::vector<RankStatusReport> Reports();
  // Blocks until some child has exited (without reaping it) or Wake() is
  // called; returns at once when no child runs and `wait_when_idle` is false.
  void WaitForChildExit();
  void Wake();
  // SIGKILLs every running rank and waits for them.
  void KillAll();
  int running_count();
  // Work dirs of removed archive_workdir ranks, once each.
  std::vector<ArchiveTask> TakeArchives();
  // Ranks newly marked capture_stacks, once each.
  std::vector<StackCaptureTask> TakeStackCaptures();
  // The rank's stacks are captured: a terminating rank's SIGKILL is due now
  // (at the next EnforceDeadlines) rather than at its deadline.
  void StacksCaptured(const RankKey& key);
  // Starts a helper child (health check) that the reaper must leave to its
  // owner, who Wait()s for it and then calls EndForeign(pid).
  absl::StatusOr<std::unique_ptr<Subprocess>> StartForeign(const SubprocessOptions& options);
  void EndForeign(pid_t pid);
  // Variables added to every rank's environment from now on (the checkpoint
  // service's socket). Call before the first Converge.
  void SetExtraRankEnv(std::map<std::string, std::string> env);
  // The node checkpoint service's registry of ranks (not owned; null: none),
  // written for every rank started from now on. Call before the first Converge.
  void SetCheckpointRegistry(ckptsvc::RankRegistry* registry);
  // The agent's image cache (not owned; null: none, and a rank with an image
  // fails to start). A rank whose image is not unpacked yet is not started:
  // the cache fetches it off this lock and a later Converge starts the rank;
  // a failed fetch fails the rank. A running rank pins its image. Call before
  // the first Converge.
  void SetImageCache(ImageCache* images);
  // The agent's volume copies (volume_sync.h; not owned; null: none, and a
  // rank that mounts volumes fails to start). A rank whose volumes are not
  // here yet is not started; a failed fetch fails it. Call before the first
  // Converge.
  void SetVolumeSync(VolumeSync* volumes);
  // Restores work dirs of ranks with a restore_key before they start (workdir_snapshot.h).
  void SetWorkdirSnapshots(WorkdirSnapshots* workdirs);

  // A shell in `key`'s running rank (shell_session.h): starts `command` in
  // its sandbox (Sandbox::WrapShell: the rank process's namespaces, cgroups
  // and uid; unsandboxed: as the agent, in the rank's cwd) with the rank's
  // environment and TERM=`term`, its stdin/stdout/stderr on the given
  // descriptors, in a session of its own (with `tty`, stdin its controlling
  // terminal). `tenant` (non-empty) must be the rank's. The reaper leaves it
  // to the caller, who waits for it and calls EndForeign(pid)
  // (rank_supervisor_shell.cc). NotFound when the rank does not run here.
  absl::StatusOr<pid_t> StartShell(const RankKey& key, const std::string& tenant,
                                   const std::vector<std::string>& command, const std::string& term, bool tty,
                                   int stdin_fd, int stdout_fd);
  // Called (under this supervisor's lock: it must not call back) with each
  // new notice of a rank (RankTarget::notice), besides its log. Call before
  // the first Converge.
  void SetNoticeListener(std::function<void(const RankKey&, const std::string&)> listener) {
    absl::MutexLock lock(&mu_);
    notice_listener_ = std::move(listener);
  }

  // WORK_DIR/jobs/<job>/attempt-<a>/rank-<r>.log; InvalidArgument for a job
  // id that is not a safe file name.
  static absl::StatusOr<std::string> LogPath(const std::string& work_dir, const RankKey& key);
  // WORK_DIR/jobs/<job>/attempt-<a>/rank-<r> (an interactive rank's cwd).
  static absl::StatusOr<std::string> RankDir(const std::string& work_dir, const RankKey& key);

 private:
  struct Rank {
    std::unique_ptr<Subprocess> process;  // null when it failed to start
    RankStatusReport report;
    SocketTally sockets;  // its TCP bytes, kept cumulative (box_activity.h)
    bool term_sent = false;
    bool kill_sent = false;
    TimePoint kill_at;
    std::string notice;  // last notice appended to the log
    std::string log_path;
    std::string dir;     // own work dir when archived
    std::string archive_uri;
    std::string snapshot_key;  // the newest the coordinator gave (RankTarget::snapshot_key)
    std::vector<int32_t> gpu_ids;
    std::string progress_path;  // the agent's view of its progress page
    bool stacks_requested = false;
    std::string image_pinned;  // the digest this rank pins in the ImageCache
  };
  // An attempt's master port on this node (see the header comment).
  struct Rendezvous {
    int fd = -1;        // the listening socket until rank 0 has it
    int port = 0;       // the ranks' MASTER_PORT here
    std::string error;  // non-empty: the attempt's ranks here cannot start, and why
    bool port_taken = false;  // the error is that another process holds the port
  };
  using AttemptKey = std::pair<std::string, int32_t>;
  void StartLocked(const RankTarget& target, const std::vector<RankTarget>& desired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attempt's Rendezvous, bound at its first rank here; null when its
  // rank 0 does not run here or it has one rank.
  Rendezvous* RendezvousLocked(const RankTarget& target, const std::vector<RankTarget>& desired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the Rendezvous of attempts that have no rank here any more.
  void DropRendezvousLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records how a rank ended (and what its sandbox says of it).
  void EndedLocked(const RankKey& key, Rank& r, const ExitInfo& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string work_dir_;
  const Clock* const clock_;
  Sandbox* const sandbox_;
  TelemetryHub* const telemetry_;
  absl::Mutex mu_;
  std::map<RankKey, Rank> ranks_ ABSL_GUARDED_BY(mu_);
  int woken_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<ArchiveTask> archives_ ABSL_GUARDED_BY(mu_);
  std::vector<StackCaptureTask> captures_ ABSL_GUARDED_BY(mu_);
  std::set<pid_t> foreign_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> extra_env_ ABSL_GUARDED_BY(mu_);
  std::map<AttemptKey, Rendezvous> rendezvous_ ABSL_GUARDED_BY(mu_);
  ckptsvc::RankRegistry* registry_ ABSL_GUARDED_BY(mu_) = nullptr;
  ImageCache* images_ ABSL_GUARDED_BY(mu_) = nullptr;
  VolumeSync* volumes_ ABSL_GUARDED_BY(mu_) = nullptr;
  WorkdirSnapshots* workdirs_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::function<void(const RankKey&, const std::string&)> notice_listener_ ABSL_GUARDED_BY(mu_);
  int64_t shells_started_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace athanor::agent
