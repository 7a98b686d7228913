// CheckpointCommitter: the coordinator's commit of checkpoints written by the
// node checkpoint services (docs/architecture.md, "Who uploads").
//
// The store is the record of what is durable: a service writes a rank's
// manifest only after its shard is durable, so a step is complete when the
// manifest of every rank of one world size is there. CompleteSteps(job, uri)
// commits each complete step newer than the job's newest COMMIT (WriteCommit:
// a create-only put, idempotent), reports it (the core records it durably as
// the job's committed step), then applies retention, which also sweeps older
// uncommitted steps and orphaned multipart uploads.
//
// It runs when a service reports a durable shard (the fast path, on this
// object's worker thread) and on every checkpoint poll (which covers a
// coordinator killed between "all durable" and COMMIT, and lost reports):
// either way a step gets one COMMIT.
//
// Threading: thread-safe; calls are serialised by mu_ and block on the store.
// `report` is called without any lock held. The destructor drains the queue.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace athanor::coord {

class CheckpointCommitter {
 public:
  using Report = std::function<void(const std::string& job, int64_t step, int64_t commit_unix)>;
  // `clock` is not owned and must outlive this object.
  CheckpointCommitter(Report report, const Clock* clock);
  ~CheckpointCommitter();

  // The newest step this call committed, if any. Errors name the store object.
  // `keep_last` > 0 is remembered for the job (services send it with each
  // report); 0 uses the remembered value, and with none retention is left to
  // the job's rank 0 (which applies it at start).
  absl::StatusOr<std::optional<int64_t>> CompleteSteps(const std::string& job,
                                                       const std::string& uri, int keep_last);

  // Test hook (the coordinator's ATHANOR_TEST_CRASH_BEFORE_COMMIT): called
  // after a step is found complete and before its COMMIT is written. Set
  // before any other call.
  void set_before_commit(std::function<void(const std::string& job, int64_t step)> hook) {
    before_commit_ = std::move(hook);
  }

  // CompleteSteps on the worker thread; `done` gets its result there.
  using Done = std::function<void(absl::StatusOr<std::optional<int64_t>>)>;
  void CompleteStepsAsync(std::string job, std::string uri, int keep_last, Done done);

 private:
  struct Task {
    std::string job, uri;
    int keep_last;
    Done done;
  };
  void WorkLoop();

  const Report report_;
  const Clock* const clock_;
  std::function<void(const std::string&, int64_t)> before_commit_;
  absl::Mutex commit_mu_;  // one CompleteSteps at a time
  std::map<std::string, int> keep_last_ ABSL_GUARDED_BY(commit_mu_);
  absl::Mutex queue_mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread worker_;
};

}  // namespace athanor::coord
