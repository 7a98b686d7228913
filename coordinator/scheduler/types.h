// Plain value types of the scheduler core: what a node offers, what a job asks
// for, and the decisions a scheduling pass returns.
//
// The core is pure: it holds cluster state, applies policy and reads an
// injected Clock; it does no I/O. The coordinator persists each Decision
// before acting on it, and on restart replays its store into a fresh
// Scheduler (Restore), so the same code runs in the service, in tests and in
// the trace-replay benchmark.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"

namespace athanor::sched {

using JobId = std::string;

// Lifecycle of a node as the scheduler sees it. Only UP nodes receive new
// work; DRAINING nodes keep their jobs and become DRAINED when empty; DOWN
// nodes receive nothing (their jobs' resources stay held until each job is
// reported exited, so nothing is ever given twice). UNKNOWN is DOWN as far as
// placement goes: a node restored from the coordinator's store whose agent has
// not registered again yet.
enum class MemberState { kUp, kDraining, kDrained, kDown, kUnknown };
const char* MemberStateName(MemberState state);

struct NodeSpec {
  std::string name;
  int gpus = 0;
  std::string gpu_model;      // e.g. "H100"
  int64_t gpu_memory_mb = 0;  // per GPU
  int cpus = 0;
  int64_t memory_mb = 0;
  std::map<std::string, std::string> labels;  // "switch", "rack", ...
  // Where the node's agent and ranks are reached; carried for the coordinator,
  // never read by placement.
  std::string agent_address;
  std::string host;
  bool unsandboxed = false;
};

// A job asks for `nodes` distinct nodes, each contributing exactly
// `gpus_per_node` GPUs (all-or-nothing), plus per-node CPU and RAM.
struct JobRequest {
  JobId id;
  std::string tenant;
  int priority = 0;           // higher runs first
  bool preemptible = false;
  int nodes = 1;
  // Elastic: it starts on as many nodes as it can get from min_nodes up to
  // `nodes`; 0 (or `nodes`): exactly `nodes`. Nothing is preempted to give
  // it more than min_nodes.
  int min_nodes = 0;
  int gpus_per_node = 1;
  std::string gpu_model;      // empty: any model
  int64_t min_gpu_memory_mb = 0;
  int cpus_per_node = 0;
  int64_t memory_mb_per_node = 0;
  Duration time_limit{0};     // 0: none declared (never ends, for reservations)
  Duration grace{0};          // preemption grace; 0: SchedulerOptions::default_grace
  uint64_t submit_seq = 0;    // FIFO order within a class; kept across requeues
  // Nodes this job is not placed on (it moved off them as a straggler's);
  // not part of "can it ever fit" (Submit), only of placement.
  std::vector<std::string> avoid_nodes;
  // The job's environment image: other things equal, a single-node job goes
  // to a node whose agent has it cached (placement.cc). Not part of fit.
  std::string image_digest;

  int total_gpus() const { return nodes * gpus_per_node; }
  bool elastic() const { return min_nodes > 0 && min_nodes < nodes; }
  int least_nodes() const { return elastic() ? min_nodes : nodes; }
  bool Avoids(const std::string& node) const {
    return std::find(avoid_nodes.begin(), avoid_nodes.end(), node) != avoid_nodes.end();
  }
};

// What placement depends on, for caches of "this shape does not fit" and for
// grouping pending jobs that place alike.
using ShapeKey = std::tuple<int, int, int, std::string, int64_t, int, int64_t, std::vector<std::string>>;
inline ShapeKey ShapeOf(const JobRequest& job) {
  return {job.nodes, job.elastic() ? job.min_nodes : 0, job.gpus_per_node, job.gpu_model,
          job.min_gpu_memory_mb, job.cpus_per_node, job.memory_mb_per_node, job.avoid_nodes};
}

// The GPUs (device indices) one node gives a job.
struct NodeAllocation {
  std::string node;
  std::vector<int> gpu_ids;
  bool operator==(const NodeAllocation&) const = default;
};

// One decision of a pass. kStart: the job now holds `placement` (one entry per
// node, in node-rank order). kPreempt: the job is now PREEMPTING and should be
// asked to checkpoint and exit within `grace`; its resources stay held until
// OnJobExited.
struct Decision {
  enum class Kind { kStart, kPreempt };
  Kind kind = Kind::kStart;
  JobId job;
  std::vector<NodeAllocation> placement;  // kStart only
  Duration grace{0};                      // kPreempt only
};

// The defaults of the coordinator's --default-grace-s and --min-run-time-s,
// defined here once: StateOptions and the flags take them from here.
inline constexpr Duration kDefaultGrace = std::chrono::seconds(60);
inline constexpr Duration kDefaultMinRunTime = std::chrono::seconds(300);

// How a pass orders pending jobs (scheduler.h has the policy of each).
enum class SchedulingPolicy {
  kDefault,  // priority classes, fair share between tenants, FIFO within a tenant
  kFifo,     // submit order only: no classes, no fair share, no preemption for order
  kLas,      // least attained service first, inside each priority class (las.h)
};
const char* SchedulingPolicyName(SchedulingPolicy policy);
// "default", "fifo", "las"; nullopt for anything else.
std::optional<SchedulingPolicy> ParseSchedulingPolicy(const std::string& name);

// The least-attained-service policy's queues (las.h). A job's queue is the
// number of thresholds its attained GPU time has reached since its service
// was last forgiven (at every requeue). A running job is preempted for LAS
// order only within `checkpoint_window` after it committed a checkpoint in
// its current attempt, so that it loses at most that much work, and at most
// `max_order_preemptions` times in its life (priority preemption is not
// limited so). A job preempted for order (or whose node went DOWN) that has
// waited `recall_after` since it was requeued recalls its GPUs: it goes
// ahead of its class's queues and may preempt any job of its class that
// started since, whatever that job's queue, checkpoint or run time (las.h).
struct LasOptions {
  std::vector<double> thresholds_gpu_s = {36000.0, 360000.0};  // ascending
  Duration checkpoint_window = std::chrono::seconds(300);
  int max_order_preemptions = 1;  // per job; 0: LAS order never preempts
  Duration recall_after = std::chrono::seconds(60);  // 0: never recalls
};

struct SchedulerOptions {
  SchedulingPolicy policy = SchedulingPolicy::kDefault;
  LasOptions las;                        // kLas only
  // Default and LAS: a job pending this long in one spell is visited before
  // the policy's order, longest waiting first, so it is the head (and gets
  // the reservation) ahead of every class, tenant and LAS queue; it preempts
  // only what its own class may. Zero: no ageing.
  Duration age_limit = std::chrono::hours(12);
  bool backfill = true;                  // off: strict order
  // Default policy with strict_fair_share: the last pass's head is visited
  // first again, so it keeps the reservation until it starts, rather than
  // fair share handing the place to another tenant's job as usage shifts
  // (the reserved nodes would drain for one gang, then another). It gives
  // way to a pending job of a higher class, to aged jobs, and when it is
  // held or over quota. Without strict fair share the head is the oldest
  // job that cannot start, which changes only as jobs start or an older
  // one is requeued, so there is nothing to keep. kLas keeps its own
  // order: a new job goes ahead of one with service. Off by default: it
  // bounds the worst waits but costs mean JCT (docs/benchmarks.md,
  // "Scheduler quality: athanor-sim").
  bool keep_head = false;
  // Default policy: how far fair share orders a class. Off (the default):
  // jobs start in submit order up to the first that cannot start, which
  // is the head and gets the reservation, and fair share between tenants
  // orders the jobs behind it, which start only where they cannot delay
  // it; so no job waits for GPUs behind newer ones, and a tenant below its
  // share gets the GPUs the head cannot use first. On: fair share orders
  // every job, the head too, so a tenant above its share waits as long as
  // others keep submitting, up to age_limit.
  bool strict_fair_share = false;
  Duration default_grace = kDefaultGrace;  // preemption grace when a job names none
  Duration min_run_time = kDefaultMinRunTime;  // before a job may be preempted
  int exact_preemption_limit = 16;       // candidates searched exhaustively; greedy above
};

// A job's current state inside the core.
enum class QueuedJobState { kPending, kRunning, kPreempting };
const char* QueuedJobStateName(QueuedJobState state);

}  // namespace athanor::sched
