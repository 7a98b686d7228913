#include "coordinator/scheduler/scheduler_view.h"

#include "absl/strings/str_cat.h"

namespace athanor::sched {

absl::StatusOr<WhyReport> SchedulerView::Why(const JobId& id) const {
  const QueuedJob* job = s_.Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  return Explain(s_, *job, clock_->Now());
}

}  // namespace athanor::sched
