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
// Starvation: a pending job that has waited (since it last became pending)
// `promote_knob` times as long as it has run goes back to queue 0, and the
// service it had is forgiven (QueuedJob::las_forgiven_gpu_s), as Tiresias
// resets a promoted job: it then keeps queue 0 until it has received a
// threshold's worth again, instead of being preempted at once.
//
// Pure functions of the job, its attained service and the time.
#pragma once

#include "coordinator/scheduler/queued_job.h"
#include "coordinator/scheduler/types.h"

namespace athanor::sched {

// The job's queue, 0 .. thresholds.size(), from `attained_gpu_s` (all it
// has received, Accounting's count) less what was forgiven.
int LasQueue(const LasOptions& options, const QueuedJob& job, double attained_gpu_s);
// Whether a pending job has waited long enough to be promoted at `now`.
bool LasStarved(const LasOptions& options, const QueuedJob& job, double attained_gpu_s, TimePoint now);
// Whether a pending job has waited LasOptions::age_limit since it last
// became pending: it is then ordered ahead of every class and queue.
bool LasAged(const LasOptions& options, const QueuedJob& job, TimePoint now);

}  // namespace athanor::sched
