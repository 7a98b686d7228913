#include "worker/agent/stack_capturer.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/escape.h"
#include "common/logging.h"
#include "worker/agent/rank_log.h"

namespace athanor::agent {
namespace {

}  // namespace

StackCapturer::StackCapturer(RankSupervisor* supervisor, StackCaptureBounds bounds)
    : supervisor_(supervisor), bounds_(bounds) {
  thread_ = std::thread([this] { Loop(); });
}

StackCapturer::~StackCapturer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void StackCapturer::TakeNew() {
  std::vector<StackCaptureTask> tasks = supervisor_->TakeStackCaptures();
  if (tasks.empty()) return;
  absl::MutexLock lock(&mu_);
  for (StackCaptureTask& t : tasks) queue_.push_back(std::move(t));
}

void StackCapturer::Drain() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return (queue_.empty() && !busy_) || stop_; };
  mu_.Await(absl::Condition(&idle));
}

void StackCapturer::Loop() {
  for (;;) {
    StackCaptureTask t;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      t = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    ATHANOR_LOG(WARNING) << "job " << t.key.job_id << " attempt " << t.key.attempt << " rank " << t.key.rank
                         << " is hung: capturing its stacks into its log";
    std::string stacks = CaptureStacks(supervisor_, t.leader, bounds_);
    absl::Status appended =
        AppendToRankLog(t.work_dir, t.key, absl::StrCat("athanor: hang detected; thread stacks of rank ", t.key.rank,
                                                        ":\n", stacks, "athanor: end of stacks\n"));
    if (!appended.ok()) {
      ATHANOR_LOG(WARNING) << "cannot append the stacks of job " << t.key.job_id << " rank " << t.key.rank
                           << " to its log: " << EscapeControls(appended.message());
    }
    supervisor_->StacksCaptured(t.key);  // hung: no point waiting for SIGTERM to work
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace athanor::agent
