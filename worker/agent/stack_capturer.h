// StackCapturer: captures hung ranks' thread stacks into their logs off the
// agent's heartbeat loop.
//
// A hang's stacks are the evidence a tenant reads first, but capturing them
// runs a debugger per process for up to seconds each, and a rank decides how
// many processes it has. Done on the heartbeat loop, one tenant's hung job of
// many processes would stall the node's heartbeats (and so look like a dead
// node, for every tenant on it). Here one thread of its own takes the tasks in
// turn; each rank's capture is bounded in processes (`max_processes`, the
// rest named and skipped) and in time (`per_process` each, `per_rank` in all).
//
// Thread model: Submit may be called from any thread; the capture thread
// calls the RankSupervisor (which locks for itself). The destructor stops the
// thread after the capture in progress, dropping what is queued.
#pragma once

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/agent/rank_progress.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

class StackCapturer {
 public:
  // `supervisor` is not owned and must outlive this object.
  StackCapturer(RankSupervisor* supervisor, StackCaptureBounds bounds);
  ~StackCapturer();
  StackCapturer(const StackCapturer&) = delete;
  StackCapturer& operator=(const StackCapturer&) = delete;

  // Queues the supervisor's newly marked ranks; returns at once.
  void TakeNew();
  // Blocks until every task queued so far is written (tests).
  void Drain();

 private:
  void Loop();

  RankSupervisor* const supervisor_;
  const StackCaptureBounds bounds_;
  absl::Mutex mu_;
  std::deque<StackCaptureTask> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace athanor::agent
