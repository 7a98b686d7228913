#include "coordinator/checkpoints/checkpoint_poller.h"

#include "checkpoint/catalog.h"
#include "checkpoint/object_store.h"

namespace athanor::coord {

CheckpointPoller::CheckpointPoller(Targets targets, Report report, Duration interval,
                                   Complete complete)
    : targets_(std::move(targets)), report_(std::move(report)), complete_(std::move(complete)) {
  thread_ = std::thread([this, interval] { Loop(interval); });
}

CheckpointPoller::~CheckpointPoller() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CheckpointPoller::Loop(Duration interval) {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::FromChrono(interval))) return;
    }
    for (const auto& [id, uri] : targets_()) {
      if (complete_) complete_(id, uri);
      absl::StatusOr<std::unique_ptr<ObjectStore>> store = OpenObjectStore(uri);
      if (!store.ok()) continue;
      absl::StatusOr<std::vector<CommittedStep>> steps = ListCommitted(store->get(), id);
      if (!steps.ok() || steps->empty()) continue;
      report_(id, steps->back().step, steps->back().commit_unix);
    }
  }
}

}  // namespace athanor::coord
