#include "coordinator/core/attempt_spans.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "common/truncate.h"
#include "coordinator/core/elastic_resize.h"

namespace athanor::coord {

constexpr size_t kMaxSpanReason = 512;

void EndAttemptSpan(JobRecord* job, JobState outcome, bool preempted, bool platform_fault,
                    const std::string& reason, double now) {
  if (job->attempt <= 0 || static_cast<size_t>(job->attempt) > job->attempt_spans.size()) return;
  AttemptSpan& span = job->attempt_spans[job->attempt - 1];
  if (span.end != 0) return;
  span.end = now;
  span.outcome = outcome == JobState::kPending ? (preempted ? "preempted" : "restarted")
                                               : absl::AsciiStrToLower(JobStateName(outcome));
  span.reason = TruncateAtWord(reason, kMaxSpanReason);
  span.platform_fault = platform_fault;
  // A resize that became a cancel or a failure on the way is not one.
  if (outcome == JobState::kPending && !job->stop_resize.empty()) {
    span.outcome = job->stop_resize;
    span.steps_lost = StepsPastCheckpoint(*job);
  }
}

void CreditLateCheckpoint(JobRecord* job, int64_t committed_before) {
  // Only while the job waits: its next attempt will resume from this commit
  // (the coordinator holds it while a newer checkpoint uploads). Once placed,
  // the next attempt may have read an older one already.
  if (job->allocated || job->attempt <= 0 || static_cast<size_t>(job->attempt) > job->attempt_spans.size()) return;
  AttemptSpan& span = job->attempt_spans[job->attempt - 1];
  if (span.end == 0 || (span.outcome != "grown" && span.outcome != "shrunk")) return;
  const int64_t gained = job->committed_step - std::max<int64_t>(committed_before, 0);
  span.steps_lost = std::max<int64_t>(0, span.steps_lost - gained);
}

}  // namespace athanor::coord
