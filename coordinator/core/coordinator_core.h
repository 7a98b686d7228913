// CoordinatorCore: the coordinator process's state and its threads.
//
// ClusterState lives under one mutex, held only while the state machine runs
// (microseconds for an RPC, one scheduling pass at most). Each operation hands
// its changed records to the GroupCommitter before releasing the lock, and
// its caller is answered only once they are durable. Agents' long-polls are
// parked in LongPolls and answered when a commit makes their node's new
// desired set durable, or when their wait ends; no thread waits for them.
//
// Threads: the committer, the long-poll timer, the scheduler loop (passes
// when something may have freed room or queued a job, and a tick every
// `tick_interval` for heartbeat timeouts and idle reclaim) and the checkpoint
// poller. Callbacks given to async operations run on the committer or timer
// thread, without locks held: they must not block.
//
// Thread-safe. The Clock is not owned and must outlive the core.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/checkpoints/checkpoint_commit.h"
#include "coordinator/checkpoints/checkpoint_poller.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/core/core_observer.h"
#include "coordinator/core/long_polls.h"
#include "coordinator/store/group_commit.h"
#include "coordinator/store/store.h"

namespace athanor::coord {

struct HeartbeatResult {
  absl::Status status;  // Unavailable when the coordinator shuts down
  bool reregister = false;
  uint64_t generation = 0;
  std::vector<DesiredRank> desired;
  Duration held{0};  // how long the poll was parked
};

struct HeartbeatRequest {
  std::string node;
  uint64_t known_generation = 0;
  std::vector<RankReport> ranks;
  Duration max_wait{0};
  bool health_ok = true;
  std::string health_message;
  std::vector<std::string> cached_images;  // digests in the agent's image cache
};

class CoordinatorCore {
 public:
  // Restores what `store` holds (the core owns it from now on; its
  // committer thread is its only user) and starts the threads.
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(
      StateOptions options, std::unique_ptr<Store> store, const Clock* clock,
      Duration tick_interval, Duration checkpoint_poll = Seconds(30),
      CoreObserver* observer = nullptr);
  ~CoordinatorCore();  // Shutdown(), then joins the threads

  // The URI the checkpoint poller opens for a job of `tenant` stored at
  // `uri` (e.g. with the tenant's credentials); nullopt: not polled. Unset:
  // the job's URI as it is. Runs on the poller's thread under the state lock.
  using StoreUriResolver =
      std::function<std::optional<std::string>(const std::string& tenant, const std::string& uri)>;
  void SetStoreUriResolver(StoreUriResolver resolver);
  // The URI to open `job`'s store with (the resolver's answer), or nullopt
  // when its tenant may not have it opened (no credentials for it).
  std::optional<std::string> StoreUriFor(const JobRecord& job);

  using SubmitDone = std::function<void(absl::StatusOr<SubmitResult>)>;
  // `max_pending` > 0 caps the tenant's pending jobs (ClusterState::SubmitJob).
  void SubmitJob(const JobSpec& spec, const std::string& idempotency_key, SubmitDone done,
                 int32_t max_pending = 0);
  // Answers `reply` at once, or parks the poll (see the class comment).
  void Heartbeat(LongPolls::Id id, HeartbeatRequest req,
                 std::function<void(HeartbeatResult)> reply);
  LongPolls::Id NewPollId() { return polls_->NextId(); }
  // The agent went away: its parked poll is answered CANCELLED.
  void CancelHeartbeat(LongPolls::Id id);

  // Answered once durable, from the committer thread.
  using Done = std::function<void(absl::Status)>;
  void RegisterNode(const NodeRecord& node, const std::vector<RankReport>& ranks, Done done);
  void ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix, Done done);
  // A node checkpoint service took over, or failed to upload, a rank's shard
  // (ClusterCheckpoints::ReportShardUpload).
  void ReportShardUpload(const std::string& id, int32_t attempt, int64_t step, int32_t rank,
                         int32_t world_size, bool failed, const std::string& error, Done done);

  // Rank 0's newest training figures, persisted with the job (the answer
  // comes once durable; NotFound for an unknown job).
  void RecordTelemetry(const std::string& id, const TelemetryFigures& figures, Done done);

  // Runs `write` on the state under the state lock and blocks until what it
  // changed is durable: the commands of CoreCommands (core_commands.h).
  // Returns `write`'s error, else the commit's. `write` must not block or
  // call back into the core.
  absl::Status Write(absl::FunctionRef<absl::Status(ClusterState&)> write);
  // Runs `read` on the state under the state lock: the queries of CoreReads
  // (core_reads.h). `read` must not block or call back into the core.
  void Read(absl::FunctionRef<void(const ClusterState&)> read);

  // The parked heartbeats (how many; tests wait until `n` are).
  const LongPolls& polls() const { return *polls_; }

  // Answers every parked poll and stops the loops; later heartbeats are
  // answered Unavailable at once.
  void Shutdown();
  // Commits steps the node checkpoint services made durable (checkpoint_commit.h).
  CheckpointCommitter* checkpoint_committer() { return checkpoint_committer_.get(); }

 private:
  CoordinatorCore(StateOptions options, const Clock* clock, CoreObserver* observer);
  // Hands what changed to the committer; `done` runs once it is durable. A
  // null `done` with nothing changed skips the committer altogether.
  void CommitLocked(GroupCommitter::Done done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::string> StoreUriLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `op` on the state; `done` gets its result once its changes are
  // durable.
  void ApplyAsync(const std::function<absl::Status(ClusterState&)>& op, Done done);
  // Answers the polls whose node has a durable new desired set (or whose
  // wait ended); parks the others again.
  void Resolve(std::vector<LongPolls::Poll> polls, bool expired);
  HeartbeatResult ReplyLocked(const LongPolls::Poll& poll) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDurable(const std::set<std::string>& nodes, uint64_t generation);
  void SchedulerLoop(Duration tick_interval);
  // Running jobs with a checkpoint store: id -> URI (as the resolver gives it).
  std::map<std::string, std::string> CheckpointTargets();

  absl::Mutex mu_;
  ClusterState state_ ABSL_GUARDED_BY(mu_);
  // Every generation up to this one is durable: agents may see it.
  uint64_t durable_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<GroupCommitter> committer_;
  std::unique_ptr<LongPolls> polls_;
  std::thread scheduler_;
  std::unique_ptr<CheckpointPoller> checkpoint_poller_;
  StoreUriResolver store_uri_resolver_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CheckpointCommitter> checkpoint_committer_;
  CoreObserver* const observer_;  // not owned; null: metrics off
};

// Blocking forms, for tests and tools.
absl::StatusOr<SubmitResult> SubmitAndWait(CoordinatorCore* core, const JobSpec& spec,
                                           const std::string& idempotency_key = "");
HeartbeatResult HeartbeatAndWait(CoordinatorCore* core, HeartbeatRequest req);
absl::Status RegisterAndWait(CoordinatorCore* core, const NodeRecord& node,
                             const std::vector<RankReport>& ranks = {});

}  // namespace athanor::coord
