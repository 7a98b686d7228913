// Least attained service: the queue a job sits in under
// SchedulingPolicy::kLas, after Tiresias' discretised two-dimensional LAS
// (Gu et al., NSDI '19). A job's attained service is the GPU time it has
// held so far (GPUs x time: both dimensions of its size), which Accounting
// already counts; no run time is declared or predicted.
//
// The service axis is cut into a few queues by LasOptions::thresholds_gpu_s:
// queue 0 holds the jobs that have received least. A pass serves lower queues
// first, FIFO by submit order inside a queue, and a blocked job may preempt
// jobs of a higher queue (same priority class) once they have run the minimum
// run time, but only within LasOptions::checkpoint_window after such a job
// committed a checkpoint of its current attempt: Tiresias assumes preemption
// is cheap, and it is only right after a checkpoint (a job that never
// checkpoints is never preempted for order). Discrete queues rather than
// exact LAS keep jobs of similar service from preempting each other back and
// forth.
//
// Starvation: every requeue (a preemption, a failure, a resize) forgives the
// service the job had (QueuedJob::las_forgiven_gpu_s), as Tiresias resets a
// promoted job, so it returns to queue 0 at its own submit place; one
// preempted for order returns right behind the job that took its place
// (QueuedJob::las_behind_seq). Preemption for order is a loan: the victim
// (or a job whose node went DOWN) preempts no one for order itself, and once
// it has waited LasOptions::recall_after it goes ahead of its class's queues
// and may preempt any job of its class that started since it was requeued
// (a recall, counted as a preemption for order), before that job's minimum
// run time and whatever its checkpoint, so it waits minutes at most where
// fifo would have run it straight through. A job pending
// SchedulerOptions::age_limit goes ahead of every class (schedule_pass.h).
//
// A pure function of the job and its attained service.
#pragma once

#include "coordinator/scheduler/queued_job.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sched {

// The job's queue, 0 .. thresholds.size(), from `attained_gpu_s` (all it
// has received, Accounting's count) less what was forgiven.
int LasQueue(const LasOptions& options, const QueuedJob& job, double attained_gpu_s);

}  // namespace athanor::sched
