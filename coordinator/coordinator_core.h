// CoordinatorCore: ClusterState + JobStore behind one mutex, plus the ticker.
//
// Every operation runs the state machine under mu_, writes the changed
// records to the store, and only then wakes long-polling heartbeats, so no
// agent acts on a transition that is not durable. If the store fails, the
// operation returns Unavailable and agents are not woken.
//
// Thread-safe. Heartbeat() blocks up to max_wait (real time) for the desired
// sets to change. The Clock is not owned and must outlive the core.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/cluster_state.h"
#include "coordinator/job_store.h"

namespace athanor::coord {

struct HeartbeatResult {
  bool reregister = false;
  uint64_t generation = 0;
  std::vector<DesiredRank> desired;
};

// Where one rank's log lives, for GetLogs.
struct LogTarget {
  int32_t attempt = 0;
  int32_t rank = 0;
  std::string node;
  std::string agent_address;  // empty when the node is unknown
};

class CoordinatorCore {
 public:
  // Opens the store at `state_path`, restores what it holds and starts the
  // ticker (heartbeat timeouts, placement) every `tick_interval`.
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(StateOptions options,
                                                                  const std::string& state_path,
                                                                  const Clock* clock,
                                                                  Duration tick_interval,
                                                                  Duration checkpoint_poll = Seconds(30));
  ~CoordinatorCore();  // stops the ticker and releases long-polls

  absl::StatusOr<std::string> SubmitJob(const JobSpec& spec);
  absl::StatusOr<JobRecord> CancelJob(const std::string& id);
  absl::StatusOr<JobRecord> GetJob(const std::string& id);
  std::vector<JobRecord> ListJobs(bool include_finished, const std::string& tenant);
  std::vector<NodeView> ListNodes();
  absl::Status RegisterNode(const NodeRecord& node, const std::vector<RankReport>& ranks);
  absl::StatusOr<HeartbeatResult> Heartbeat(const std::string& node, uint64_t known_generation,
                                            const std::vector<RankReport>& ranks,
                                            Duration max_wait, bool health_ok = true,
                                            const std::string& health_message = "");
  // Admin operations; see ClusterState. Each is durable before it returns.
  absl::StatusOr<JobRecord> PreemptJob(const std::string& id, Duration grace);
  absl::StatusOr<NodeView> DrainNode(const std::string& name, Duration grace,
                                     const std::string& reason);
  absl::StatusOr<NodeView> UndrainNode(const std::string& name);
  absl::StatusOr<std::vector<QuotaRow>> SetQuota(const std::string& tenant, int32_t gpus);
  std::vector<QuotaRow> Quotas();
  std::vector<UsageRow> Usage(const std::string& tenant, double since_unix);
  absl::StatusOr<WhyResult> Why(const std::string& id);
  absl::Status ReportCheckpoint(const std::string& id, int64_t step, int64_t commit_unix);
  // The ranks of `attempt` (0: the current/last one) to read logs of;
  // rank < 0 for all. NotFound / InvalidArgument naming the job or rank.
  absl::StatusOr<std::vector<LogTarget>> LogTargets(const std::string& job_id, int32_t rank,
                                                    int32_t attempt);
  // Wakes every long-poll and stops the ticker; later heartbeats return at once.
  void Shutdown();

 private:
  CoordinatorCore(StateOptions options, const Clock* clock, std::unique_ptr<JobStore> store);
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TickLoop(Duration interval);
  // Reads each running job's newest committed step off its checkpoint store
  // (without holding mu_) every `interval`.
  void CheckpointLoop(Duration interval);

  absl::Mutex mu_;
  absl::CondVar changed_;  // generation moved or shutdown
  ClusterState state_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<JobStore> store_ ABSL_GUARDED_BY(mu_);
  uint64_t published_generation_ ABSL_GUARDED_BY(mu_) = 0;  // durable and visible to agents
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
  std::thread checkpoint_poller_;
};

}  // namespace athanor::coord
