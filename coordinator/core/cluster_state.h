// ClusterState: the coordinator's pure core. It decides; it does no I/O.
//
// It wires the parts that each own one concern, over one node table (the
// scheduler's Membership) and one ChangeLog:
//   NodeTable        nodes, liveness, drain (node_table.h)
//   JobLifecycle     job records and their state machine (job_lifecycle.h)
//   AttemptLauncher  placements -> attempts and the env contract (attempt_launcher.h)
//   TenantAccounts   quotas, usage, idle reclaim (tenant_accounts.h)
//   TenantBilling    prices, plans, the ledger and metering (tenant_billing.h)
//   HangDetector     hangs and stragglers from rank progress (hang_detector.h)
//   UploadHolds      requeued jobs waiting for a checkpoint upload (upload_holds.h)
//   OwedStores       requeued jobs' volume stores still owed (owed_stores.h)
//   sched::Scheduler placement and policy (scheduler/)
// and runs the operations that span several of them; groups of those are
// facets in files of their own (agents(), checkpoints(), admin(), billing(),
// volumes(), snapshots(), images()), friends of this class. Each operation changes
// records in memory and marks them; the owner (CoordinatorCore) takes them
// with TakeChanges(), makes them durable, and only then lets agents see the
// desired sets of the nodes whose generation moved. Time comes from the
// injected Clock, so tests drive timeouts with a FakeClock.
//
// Not thread-safe: the owner serialises calls. The Clock is not owned.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/checkpoints/upload_holds.h"
#include "coordinator/core/attempt_launcher.h"
#include "coordinator/core/cluster_admin.h"
#include "coordinator/core/cluster_agents.h"
#include "coordinator/core/cluster_billing.h"
#include "coordinator/core/cluster_checkpoints.h"
#include "coordinator/core/cluster_snapshots.h"
#include "coordinator/core/cluster_volumes.h"
#include "coordinator/core/cluster_images.h"
#include "coordinator/core/job_lifecycle.h"
#include "coordinator/core/node_table.h"
#include "coordinator/core/tenant_accounts.h"
#include "coordinator/core/tenant_billing.h"
#include "coordinator/health/hang_detector.h"
#include "coordinator/images/image_registry.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/snapshots/snapshot_registry.h"
#include "coordinator/volumes/volume_registry.h"

namespace athanor::coord {

class ClusterState {
 public:
  ClusterState(StateOptions options, const Clock* clock);

  // What the store held (after a coordinator restart). Nodes are UNKNOWN
  // until their agent registers again; attempts holding GPUs keep them.
  // `quotas` (from the store) override the --quota flags.
  void Restore(std::vector<JobRecord> jobs, const std::vector<NodeRecord>& nodes,
               const std::map<std::string, int32_t>& quotas = {});

  // Validates, refuses a job that can never fit (InvalidArgument naming why)
  // and queues it. A repeated idempotency key returns the first job.
  // `max_pending`: JobLifecycle::Submit's cap on the tenant's pending jobs.
  absl::StatusOr<SubmitResult> SubmitJob(const JobSpec& spec, const std::string& key = "",
                                         int32_t max_pending = 0);
  absl::StatusOr<JobRecord> CancelJob(const std::string& id);
  // (Use of an interactive instance seen outside agents' reports, a shell's
  // input or `athanor alloc --keep`, is jobs().NoteActivity.)

  // Heartbeat timeouts, stop completion, idle reclaim, and a scheduling pass.
  void Tick();
  // One scheduling pass; its decisions are applied (attempts start, victims
  // are preempted). Returns how many decisions it made.
  size_t Schedule();

  // Deferred scheduling (StateOptions::schedule_inline off): whether an
  // operation since the last call may have let a job start.
  bool TakePassWanted() { return std::exchange(pass_wanted_, false); }

  // ---- agents: registration, heartbeats (cluster_agents.h); the ranks a
  // node should run is ClusterAgents::DesiredFor over a const state.
  ClusterAgents agents() { return ClusterAgents(*this); }
  // ---- checkpoints: committed steps, shard uploads (cluster_checkpoints.h).
  ClusterCheckpoints checkpoints() { return ClusterCheckpoints(*this); }
  // ---- admin: draining, quotas (cluster_admin.h); preempting a job by hand
  // is jobs().Preempt.
  ClusterAdmin admin() { return ClusterAdmin(*this); }
  // ---- billing: prices, plans, credit (cluster_billing.h); its reads are
  // ClusterBilling's static functions over a const state.
  ClusterBilling billing() { return ClusterBilling(*this); }
  // ---- volumes: tenants' volumes and the jobs that mount them
  // (cluster_volumes.h); its reads are ClusterVolumes' static functions.
  ClusterVolumes volumes() { return ClusterVolumes(*this); }
  // ---- instance snapshots: taken on idle reclaim, restored at submit
  // (cluster_snapshots.h); its reads are ClusterSnapshots' static functions.
  ClusterSnapshots snapshots() { return ClusterSnapshots(*this); }
  // ---- images: records, resolution at submit (cluster_images.h); its reads
  // are ClusterImages' static functions over a const state.
  ClusterImages images() { return ClusterImages(*this); }

  // Why a job is where it is: a pending job's reasons and queue position, a
  // stopping one's reason (and SIGKILL time when preempted), a placed one's
  // nodes. NotFound for an unknown id.
  absl::StatusOr<WhyResult> Why(const std::string& id) const;

  // The generations of the nodes' desired sets (ChangeLog::NodeGeneration,
  // ChangeLog::generation).
  const ChangeLog& log() const { return log_; }

  // Records changed since the last call, and the nodes whose desired set moved.
  Changes TakeChanges(std::set<std::string>* touched_nodes = nullptr);

  JobLifecycle& jobs() { return jobs_; }
  const JobLifecycle& jobs() const { return jobs_; }
  const NodeTable& nodes() const { return nodes_; }
  const TenantAccounts& accounts() const { return accounts_; }

 private:
  friend class ClusterAdmin;  // facets of this class's interface
  friend class ClusterAgents;
  friend class ClusterCheckpoints;
  friend class ClusterBilling;
  friend class ClusterVolumes;
  friend class ClusterSnapshots;
  friend class ClusterImages;

  // Hangs and stragglers (cluster_state_hangs.cc): feeds running ranks'
  // progress to the detector; stops hung attempts (stacks captured first),
  // drains repeat suspects and refreshes straggler flags.
  void ObserveProgress(const std::string& node, const std::vector<RankReport>& ranks);
  void CheckHangs();
  // A job with move_off_stragglers leaves the node of a newly flagged rank:
  // stopped as a preemption, requeued avoiding that node (when enough others
  // could host it).
  void MoveOffStraggler(JobRecord* job, const RankFlag& flag);

  void ScheduleInline() {
    if (options_.schedule_inline) {
      Schedule();
    } else {
      pass_wanted_ = true;
    }
  }

  const StateOptions options_;
  const WallClock clock_;
  ChangeLog log_;
  sched::Scheduler sched_;
  NodeTable nodes_;
  TenantAccounts accounts_;
  TenantBilling billing_;
  VolumeRegistry volumes_;
  ImageRegistry images_;  // environment images' records (cluster_images.h)
  // Requeued jobs' read-write volume stores still owed (ClusterVolumes::Holds).
  OwedStores owed_stores_;
  SnapshotRegistry snapshots_;  // instance snapshots (cluster_snapshots.h)
  std::vector<std::string> snapshot_orphans_;  // data-store keys to delete (ClusterSnapshots::TakeOrphans)
  // Tenants whose jobs are held for want of credit (ClusterBilling::Enforce).
  std::set<std::string> credit_held_;
  AttemptLauncher launcher_;
  JobLifecycle jobs_;
  HangDetector hangs_;
  SuspectLedger suspects_;
  UploadHolds upload_holds_;
  bool pass_wanted_ = false;
};

// Jobs in submission order, finished ones only when asked.
std::vector<JobRecord> ListJobs(const JobLifecycle& jobs, bool include_finished);

}  // namespace athanor::coord
