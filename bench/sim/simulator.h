// Simulator: runs a Workload through the coordinator's own scheduler core
// (athanor_scheduler) on a simulated clock, as the coordinator drives it: a
// pass after every batch of events (arrivals, exits, failures, checkpoints)
// and on a tick while jobs wait; decisions applied as the coordinator would
// (a start holds the GPUs until the job ends; a preempted job exits after a
// delay and is requeued).
//
// Modelled: run times; preemption cost (a job checkpoints every
// checkpoint_interval_s of an attempt; work since its last checkpoint is
// lost when it is preempted or its node fails, and it resumes from that
// checkpoint); node failures (exponential times between failures per node,
// mean mtbf_s; a failed node's jobs are requeued and it comes back after
// repair_s); elastic jobs (SimJob::min_nodes), which start on as many of
// their nodes as fit and go as fast as the nodes they hold: at each
// checkpoint of one below its size that the scheduler would let grow
// (Scheduler::GrowableNodes), it is stopped as the coordinator stops it
// (released preempt_exit_s later, nothing lost) and requeued to start again
// larger; one that loses a node is requeued and restarts on what fits.
// Every job is preemptible and declares a time limit of limit_factor x its
// run time (0: none declared). Out-of-credit stops, with billing's own
// ledger (coordinator/billing/): a tenant with a plan gets monthly_gpu_h
// GPU-hours at the start of each calendar month (the clock's seconds read as
// Unix time; unused hours expire), is charged for the GPUs its attempts
// hold, and once it has nothing left is stopped as the coordinator stops it
// (ClusterBilling::Enforce): its pending jobs are held (Scheduler::
// SetTenantHold) and its running attempts preempted (released
// preempt_exit_s later, work since the last checkpoint lost), until the next
// month's grant. The time a job waits held counts apart from its queueing
// delay (JobOutcome::credit_held_s).
//
// Deterministic: the same workload, options and seed give the same
// decisions and outcomes; only the measured pass times vary.
// Single-threaded; each call owns its Scheduler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/sim/workload.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sim {

struct PolicyRun {
  std::string name;
  sched::SchedulerOptions options;
};

// The four policies compared on one workload: FIFO without backfill, FIFO
// with backfill and a reservation, the default, and LAS; each `base` with
// its policy and backfill set.
std::vector<PolicyRun> ComparedPolicies(const sched::SchedulerOptions& base);

struct SimOptions {
  int64_t checkpoint_interval_s = 1800;  // 0: no checkpoints, all of an attempt is lost
  double mtbf_s = 0;                     // per node; 0: nodes never fail
  int64_t repair_s = 3600;
  int64_t preempt_exit_s = 30;  // a preempted job releases its GPUs this long after the decision
  int64_t tick_s = 60;          // a pass at least this often while jobs wait
  double limit_factor = 2.0;    // declared time limit / run time; 0: none
  uint64_t seed = 1;            // node failures
  // Credit: GPU-hours each plan grants per month (0: no plans, no stops),
  // and the tenants with a plan (empty: every tenant of the workload).
  double monthly_gpu_h = 0;
  std::vector<std::string> credit_tenants;
};

struct JobOutcome {
  int64_t submit_s = 0;
  int64_t first_start_s = -1;
  int64_t finish_s = -1;  // -1: never finished (rejected, or the horizon passed)
  int64_t held_s = 0;     // wall time holding GPUs, over all attempts
  int gpus = 0;
  int priority = 0;
  int64_t run_s = 0;      // its run time when never interrupted
  int preemptions = 0;
  int failures = 0;       // attempts ended by a node failure
  int grows = 0;          // elastic: attempts stopped to start again larger
  int credit_stops = 0;   // attempts stopped because its tenant ran out of credit
  int64_t credit_held_s = 0;  // pending while its tenant was out of credit
  double lost_gpu_s = 0;  // GPU-seconds held and not kept (since the last checkpoint)
  int64_t jct_s() const { return finish_s - submit_s; }
  // Pending, over all attempts, but for the time its tenant was out of credit.
  int64_t queued_s() const { return jct_s() - held_s - credit_held_s; }
};

// One change of the cluster's state: from t_s on, busy GPUs and pending jobs.
struct Step {
  int64_t t_s = 0;
  int64_t busy_gpus = 0;
  int64_t pending = 0;
};

struct SimResult {
  std::string policy;
  std::vector<JobOutcome> jobs;  // in workload order
  int64_t total_gpus = 0;
  int64_t start_s = 0;           // first submit
  int64_t end_s = 0;             // last finish
  int64_t last_submit_s = 0;
  double busy_gpu_s = 0;         // GPUs held, integrated
  double busy_gpu_s_arrivals = 0;  // the same, from the first submit to the last
  double stranded_gpu_s = 0;     // free GPUs no waiting job's node share fits, integrated
  int preemptions = 0;
  int grows = 0;                 // elastic jobs stopped to grow
  int credit_stops = 0;          // attempts stopped for want of credit
  int credit_holds = 0;          // times a tenant ran out
  int node_failures = 0;
  int rejected = 0;              // Submit refused: never fits
  std::vector<double> pass_us;   // wall time of each pass
  // What each pass had to look at: the cluster's nodes plus its jobs, pending
  // and holding GPUs, when it began.
  std::vector<int64_t> pass_work;
  std::vector<Step> steps;
};

absl::StatusOr<SimResult> Simulate(const Workload& workload, const PolicyRun& policy,
                                   const SimOptions& options);

}  // namespace athanor::sim
