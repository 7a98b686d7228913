// Attempt spans: when each attempt of a job started and ended, and how
// (preempted and requeued, restarted after a failure, or the job's end). The
// job lifecycle ends a span when an attempt's GPUs are released; the record
// codec persists them ("attempt_spans"); GetJob reports them (rpc::AttemptNodes), which is what
// `athanor job` and the dashboard's attempts timeline show.
// Pure functions over a JobRecord; callers hold whatever lock guards it.
#pragma once

#include <string>

#include "coordinator/model/types.h"

namespace athanor::coord {

// Closes attempt `job->attempt`'s span at `now` (Unix seconds): "preempted"
// or "restarted" when `outcome` is PENDING (requeued), or the elastic
// resize it was (JobRecord::stop_resize, with the steps it threw away), else
// the outcome's name in lower case. No-op when that attempt has no open span.
void EndAttemptSpan(JobRecord* job, JobState outcome, bool preempted, bool platform_fault,
                    const std::string& reason, double now);

// A checkpoint committed after a resized attempt ended (the one its ranks
// save on SIGTERM, which lands once they have exited) while the job waits to
// be placed again: the next attempt resumes from it, so the ended span threw
// away `job->committed_step - committed_before` fewer steps. No-op unless the
// job is pending after a resize of its current attempt.
void CreditLateCheckpoint(JobRecord* job, int64_t committed_before);

}  // namespace athanor::coord
