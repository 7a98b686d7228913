// Plain records the coordinator's core works on: jobs, nodes, rank reports and
// desired ranks. Generated protobuf types stay at the RPC edges
// (proto_convert.h); everything below them (state machine, placement, store)
// uses these structs. Value types; no threading of their own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace athanor::coord {

enum class JobState { kPending, kStarting, kRunning, kPreempting, kSucceeded, kFailed, kCancelled };
enum class NodeState { kUp, kDraining, kDrained, kDown, kUnknown };

const char* JobStateName(JobState s);    // "PENDING", ...
const char* NodeStateName(NodeState s);  // "UP", ...
bool IsTerminal(JobState s);

// A job's mount of a tenant's volume (`--volume NAME:/path[:ro]`).
struct VolumeMount {
  std::string name;
  std::string path;  // absolute, normalised, inside the rank's sandbox
  bool read_only = false;
  bool operator==(const VolumeMount&) const = default;
};

struct JobSpec {
  std::string name;
  std::string tenant;
  int32_t priority = 0;
  bool preemptible = false;
  int32_t nodes = 1;
  int32_t gpus_per_node = 1;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string checkpoint_uri;
  int32_t max_restarts = 0;
  int64_t time_limit_s = 0;
  int64_t grace_period_s = 0;
  // Per-node requirements; empty/0: any.
  std::string gpu_model;
  int64_t min_gpu_memory_mb = 0;
  int32_t cpus_per_node = 0;
  int64_t memory_mb_per_node = 0;
  // An interactive allocation: reclaimed after idle_timeout_s without use.
  bool interactive = false;
  int64_t idle_timeout_s = 0;
  int64_t hang_timeout_s = 0;  // 0: max(30 s, 10x the median step time)
  // A rank flagged as a straggler moves the job off its node: the attempt is
  // stopped as for a preemption (with the job's grace) and requeued to avoid it.
  bool move_off_stragglers = false;
  // The tenant's environment: an image's name ("" : the node's own root
  // filesystem, read-only) and volumes mounted into every rank's sandbox.
  std::string image;
  std::vector<VolumeMount> volumes;
  // Interactive instances: a notebook server (the coordinator writes its
  // command), and an instance snapshot to start from (its id).
  bool notebook = false;
  std::string restore_snapshot;
  // Elastic: 0 < min_nodes < nodes runs it on as many nodes as it can get
  // between the two (sched::JobRequest::min_nodes); a lost or drained node
  // shrinks it, a checkpoint may grow it (JobLifecycle). 0: a fixed gang.
  int32_t min_nodes = 0;
  // Samples per optimizer step kept at every size (ATHANOR_GLOBAL_BATCH); 0: none.
  int64_t global_batch = 0;
  bool elastic() const { return min_nodes > 0 && min_nodes < nodes; }
};

// Why an interactive instance last counted as busy.
struct Activity {
  std::string signal;  // "gpu", "cpu", "network", "disk", "shell", "kernel", "keep", "start"
  double at_unix = 0;
  std::string detail;
};

// One attempt's hold on GPUs, for accounting (Unix seconds, fractional).
struct UsageInterval {
  double start = 0;
  double end = 0;  // 0 while the attempt holds its GPUs
  int32_t gpus = 0;
};

// One attempt's span and how it ended (the dashboard's timeline; `athanor job`).
struct AttemptSpan {
  double start = 0;     // Unix seconds, when it was placed
  double end = 0;       // 0 while it runs
  std::string outcome;  // "", "preempted", "restarted", "succeeded", "failed", "cancelled"
  std::string reason;   // why it ended
  // The platform ended it (a node lost, a hang blamed on a node, a
  // preemption for a higher priority, a squatted master port): billing
  // refunds it where the tenant's plan says so.
  bool platform_fault = false;
  // A resize ("shrunk", "grown"): the steps past the newest committed
  // checkpoint that it threw away (rank 0's telemetry; 0 when unknown).
  int64_t steps_lost = 0;
};

struct RankPlacement {
  int32_t rank = 0;
  std::string node;
  int32_t local_rank = 0;
  int32_t node_rank = 0;
  std::vector<int32_t> gpu_ids;
};

// What the coordinator knows about one rank of the current attempt.
struct RankStatus {
  int32_t rank = 0;
  bool started = false;  // an agent reported it running at least once
  bool exited = false;
  int32_t exit_code = 0;  // exit status, or 128+signal
  int32_t signal = 0;
  std::string message;  // the agent's word on the exit (e.g. "out of memory")
};

// A rank's progress page as its agent last read it (hang_detector.h).
struct RankProgressView {
  bool seen = false;
  int64_t step = -1;
  double step_compute_ms = 0;
  double step_ms = 0;
  uint64_t collective_seq = 0;
  uint64_t waiting_seq = 0;  // 0: not blocked in a collective
  std::string waiting_op;  // the collective waited in, or "checkpoint save" (waiting_seq 0)
  int64_t update_unix_ms = 0;
  bool stopped = false;  // a process of the rank is stopped
};

// A flag on one rank of an attempt (stragglers).
struct RankFlag {
  int32_t rank = 0;
  std::string node;
  std::string reason;
  double ratio = 0;  // compute per step / the other ranks' median, over the span
};

// The newest hang detected for a job.
struct HangRecord {
  int32_t attempt = 0;  // 0: none yet
  int32_t rank = -1;
  std::string node;
  std::string reason;
  int64_t detected_unix = 0;
  double stalled_s = 0;
};

// The newest training figures a job's rank 0 reported (telemetry; see
// docs/observability.md). step < 0: none yet.
struct TelemetryFigures {
  int64_t step = -1;
  double loss = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  double comm_wait_share = 0;
  double loss_scale = 0;
  int64_t skipped_steps = 0;
  double ckpt_stall_ms = 0;
  int64_t unix_ms = 0;
  int32_t attempt = 0;
  int64_t total_steps = 0;  // planned steps of the run (0: unknown)
};

struct JobRecord {
  std::string id;
  int64_t seq = 0;  // submission order; ids are its decimal form
  JobSpec spec;
  // The digest spec.image resolved to at submission (core/cluster_images.h):
  // every attempt runs exactly the image the job was submitted with. "": none.
  std::string image_digest;
  std::string idempotency_key;  // of the submission that created it; may be empty
  JobState state = JobState::kPending;
  int32_t attempt = 0;
  std::vector<RankPlacement> allocation;  // of the current (or last) attempt
  bool allocated = false;                 // its GPUs are held (attempt not yet released)
  std::vector<RankStatus> ranks;
  std::string reason;
  int64_t submit_time_unix = 0;
  int64_t start_time_unix = 0;
  int64_t end_time_unix = 0;
  int32_t restarts = 0;
  int64_t committed_step = -1;
  std::string master_addr;
  int32_t master_port = 0;
  // The attempt's /24 of --job-network ("A.B.C.0"; "" without one; "none"
  // when every one was held): held while the attempt is allocated
  // (core/job_network.h).
  std::string network_subnet;
  // The attempt is being stopped: its ranks are told to terminate, and once
  // none runs any more the allocation is released and the job moves to
  // `stop_outcome` (FAILED, CANCELLED, or PENDING to requeue).
  bool stopping = false;
  JobState stop_outcome = JobState::kFailed;
  std::string stop_reason;
  // The stop is a preemption (by the scheduler, by hand or by a drain): ranks
  // get `stop_kill_after_ms` to checkpoint and the requeue consumes no restart.
  bool preempted = false;
  // The stop is the platform's doing (AttemptSpan::platform_fault).
  bool stop_platform_fault = false;
  int64_t stop_kill_after_ms = 0;
  // An elastic job's stop that resizes it: "shrunk" (a node lost or taken
  // while enough remain) or "grown" (at a checkpoint, nodes free); "" for
  // any other stop. It is requeued like a preemption, at once.
  std::string stop_resize;
  double preempt_deadline_unix = 0;
  double last_checkpoint_unix = 0;  // when committed_step was last seen to advance
  std::vector<UsageInterval> usage;  // every attempt's GPU hold
  // Every attempt's nodes in node_rank order ([a - 1] for attempt a), so the
  // logs of earlier attempts can be found.
  std::vector<std::vector<std::string>> attempt_nodes;
  // Every attempt's span and outcome ([a - 1] for attempt a; shorter for
  // records older than it).
  std::vector<AttemptSpan> attempt_spans;
  // Interactive allocations: when the last real use was seen (Unix seconds)
  // and whether the idle warning went out.
  double last_active_unix = 0;
  bool idle_warned = false;
  Activity last_activity;  // the newest signal that counted (persisted with the job)
  // When it is reclaimed unless used before (last use + idle timeout +
  // grace; 0: not an idle-watched running instance).
  double reclaim_at_unix = 0;
  // An attempt that ended out of memory: what to try (shown with the job).
  std::string advice;
  // Hangs and stragglers (hang_detector.h). A stop for a hang asks the
  // agents to capture stacks of `hang.attempt`'s ranks. The newest hang and
  // the nodes a job moved off are persisted; flags live in memory.
  HangRecord hang;
  std::vector<RankFlag> stragglers;  // of the current attempt
  std::vector<std::string> avoid_nodes;  // moved off as stragglers (move_off_stragglers)
  // Per attempt requeued because its master port was taken on rank 0's node,
  // that node: the next rank 0 goes elsewhere, and the count is bounded
  // (JobLifecycle, kMaxMasterPortRequeues).
  std::vector<std::string> master_port_taken_on;
  TelemetryFigures last_telemetry;  // persisted every so often while it runs
  // The scheduler's marks on the job (sched::QueueMarks), copied from it each
  // time the record is taken for the store (ClusterState::TakeChanges) and
  // given back on a restore, so that a restart keeps the job's place: when a
  // pending job last became pending (Unix seconds; 0: not pending), how
  // often LAS preempted it for order, the seq it returns behind and whether
  // it recalls its GPUs (las.h).
  double queued_at_unix = 0;
  int32_t order_preemptions = 0;
  int64_t las_behind_seq = 0;
  bool las_recalls = false;
  // Billing's word to the ranks (credit low), appended once to their logs;
  // in memory only (ClusterState::CheckCredit sets it again after a restart).
  std::string billing_notice;
};

struct NodeInventory {
  int32_t gpus = 0;
  std::string gpu_model;
  int64_t gpu_memory_mb = 0;
  int32_t cpus = 0;
  int64_t memory_mb = 0;
  std::map<std::string, std::string> labels;
};

struct NodeRecord {
  std::string name;
  std::string agent_address;
  std::string host;
  NodeInventory inventory;
  NodeState state = NodeState::kUp;
  int64_t last_heartbeat_unix = 0;
  std::string reason;
  bool drain = false;  // drained by an admin or a failed health check: no new work
  bool unsandboxed = false;  // the agent runs ranks without a sandbox (--no-sandbox)
};

enum class RankPhase { kRunning, kExited, kFailedToStart };

// One rank as an agent reports it.
struct RankReport {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  RankPhase phase = RankPhase::kRunning;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
  bool signal_from_agent = false;  // `signal` was the agent's (a stop), not from elsewhere
  // kFailedToStart: another process holds the attempt's master port on the
  // node and ranks elsewhere expect it (the platform's fault, not the job's).
  bool master_port_taken = false;
  double cpu_seconds = -1;  // CPU time of the rank's processes; < 0: unknown
  double gpu_utilization = -1;  // percent (nvidia-smi); < 0: not measured
  RankProgressView progress;
  // What keeps an interactive instance busy besides CPU and GPU (cumulative
  // counters of the rank's box; the coordinator takes differences).
  bool activity_measured = false;
  double net_bytes = 0;
  double disk_write_bytes = 0;
  int32_t kernels_busy = -1;            // notebook kernels executing (-1: no notebook)
  int64_t kernel_last_activity_unix = 0;
};

// A rank a node should run (or stop, when terminate is set).
// An attempt's network as one node sees it (--job-network; docs/security.md,
// "A job's network").
struct JobNetworkPeer {
  std::string address;  // the attempt's address on that node
  std::string host;     // that node's host (the route's next hop)
};
struct JobNetworkView {
  std::string address;  // "" with peers: the coordinator had no free /24 (ranks refuse to start)
  int32_t prefix_length = 24;
  std::vector<JobNetworkPeer> peers;  // every node of the attempt, in node-rank order
};

struct DesiredRank {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::vector<int32_t> gpu_ids;
  bool terminate = false;
  int64_t kill_after_ms = 0;
  std::string notice;        // appended once to the rank's log (e.g. an idle warning)
  bool archive_workdir = false;  // upload the rank's work dir when it is removed
  std::string archive_uri;       // where to (empty: the agent's --archive-uri)
  // For the rank's sandbox: the job's tenant and per-node requests (0: the
  // job's share of the node by GPUs).
  std::string tenant;
  int64_t memory_mb = 0;
  int32_t cpus = 0;
  bool capture_stacks = false;  // stopped for a hang: capture stacks first
  std::string image_digest;         // the job's image ("" : the node's root filesystem)
  std::vector<VolumeMount> volumes;  // the job's volumes
  std::optional<JobNetworkView> network;  // the attempt's network (none: the node's)
  // Interactive instances: a notebook server; a work folder to unpack before
  // the rank starts, and where to store it when the rank ends (data-store keys).
  bool notebook = false;
  std::string restore_key;
  std::string snapshot_key;
};

// GPU-seconds of `job`'s attempts from `since_unix` up to `now_unix` (an
// attempt still holding its GPUs counts up to now_unix).
double JobGpuSeconds(const JobRecord& job, double now_unix, double since_unix = 0);

}  // namespace athanor::coord
