// CheckpointPoller: reads each running job's newest committed checkpoint
// step off its store every `interval` and reports it to the core (which
// records it for resume and victim choice). Storage I/O happens on its own
// thread, never under the core's lock.
//
// Thread-safe; owns its thread. `targets` and `report` run on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace athanor::coord {

class CheckpointPoller {
 public:
  // Running jobs with a store: id -> URI.
  using Targets = std::function<std::map<std::string, std::string>()>;
  // A job's newest committed step and its commit time (Unix seconds).
  using Report = std::function<void(const std::string& job, int64_t step, int64_t commit_unix)>;
  // Before reading a job's newest commit: commits its complete steps (the
  // coordinator's CheckpointCommitter; may be null).
  using Complete = std::function<void(const std::string& job, const std::string& uri)>;
  CheckpointPoller(Targets targets, Report report, Duration interval, Complete complete = nullptr);
  ~CheckpointPoller();  // stops and joins

 private:
  void Loop(Duration interval);

  const Targets targets_;
  const Report report_;
  const Complete complete_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace athanor::coord
