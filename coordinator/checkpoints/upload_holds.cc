#include "coordinator/checkpoints/upload_holds.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::coord {

bool UploadHolds::Committed(const std::string& id, int64_t step) {
  uploads_.Committed(id, step);
  return held_.count(id) > 0;
}

absl::StatusOr<bool> UploadHolds::Report(const std::string& id, int32_t attempt, int64_t step,
                                         int32_t rank, int32_t world_size, bool failed,
                                         const std::string& error) {
  const JobRecord* job = find_job_(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", id.substr(0, 64), "'"));
  if (step <= job->committed_step) return false;  // committed already
  if (failed) {
    ATHANOR_LOG(WARNING) << "job " << id << ": the upload of rank " << rank << "'s shard of step "
                         << step << " (attempt " << attempt << ") failed; that step will not commit: "
                         << error;
    uploads_.Failed(id, attempt, step);
    return held_.count(id) > 0;
  }
  uploads_.HandedOff(id, attempt, step, rank, world_size, clock_->Now());
  return false;
}

void UploadHolds::Refresh(const std::map<std::string, std::string>& other) {
  std::set<std::string> ids = uploads_.Jobs();
  ids.insert(held_.begin(), held_.end());
  for (const auto& [id, why] : other) ids.insert(id);
  const TimePoint now = clock_->Now();
  for (const std::string& id : ids) {
    const JobRecord* job = find_job_(id);
    if (job == nullptr || IsTerminal(job->state)) {
      uploads_.Forget(id);
      held_.erase(id);
      continue;
    }
    if (job->allocated) continue;  // running or stopping: nothing to hold yet
    std::optional<CheckpointUploads::Wait> wait = uploads_.MustWait(id, job->committed_step, now);
    if (std::optional<int64_t> step = uploads_.TakeGaveUp(id)) {
      ATHANOR_LOG(WARNING) << "job " << id << ": checkpoint step " << *step
                           << " did not commit or fail within "
                           << ToSeconds(uploads_.max_wait()) << " s of its hand-off; the next "
                           << "attempt resumes from the newest committed step ("
                           << job->committed_step << ")";
    }
    std::string why;
    if (wait.has_value()) {
      why = absl::StrCat("waiting for checkpoint step ", wait->step,
                         " to finish uploading (handed off by ", wait->ranks,
                         wait->ranks == 1 ? " rank" : " ranks", "; committed step ",
                         job->committed_step, "); gives up in ",
                         static_cast<int64_t>(ToSeconds(wait->until - now) + 0.999), " s");
      held_.insert(id);
    }
    if (auto o = other.find(id); o != other.end()) {
      why = why.empty() ? o->second : absl::StrCat(why, "; ", o->second);
      held_.insert(id);
    } else if (why.empty() && !held_.erase(id)) {
      continue;  // neither held nor to hold
    }
    if (absl::Status s = sched_->SetHold(job->id, why); !s.ok()) {
      ATHANOR_LOG(ERROR) << "scheduler: holding job " << id << ": " << s;
    }
  }
}

}  // namespace athanor::coord
