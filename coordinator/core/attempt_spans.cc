#include "coordinator/core/attempt_spans.h"

#include "absl/strings/ascii.h"
#include "common/truncate.h"

namespace athanor::coord {

constexpr size_t kMaxSpanReason = 512;

void EndAttemptSpan(JobRecord* job, JobState outcome, bool preempted, const std::string& reason,
                    double now) {
  if (job->attempt <= 0 || static_cast<size_t>(job->attempt) > job->attempt_spans.size()) return;
  AttemptSpan& span = job->attempt_spans[job->attempt - 1];
  if (span.end != 0) return;
  span.end = now;
  span.outcome = outcome == JobState::kPending ? (preempted ? "preempted" : "restarted")
                                               : absl::AsciiStrToLower(JobStateName(outcome));
  span.reason = TruncateAtWord(reason, kMaxSpanReason);
}

}  // namespace athanor::coord
