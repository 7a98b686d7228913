// CoreObserver: how CoordinatorCore tells observability what happened
// without knowing about it (metrics, the cluster view). Null when metrics
// are off (athanor-coordinator --no-metrics).
#pragma once

#include <cstdint>

#include "common/clock.h"
#include "coordinator/store/store.h"

namespace athanor::coord {

class ClusterState;

class CoreObserver {
 public:
  virtual ~CoreObserver() = default;
  // On the scheduler thread, under the core's state lock, after each pass or
  // tick (`pass`: how long it ran). Must be quick: it may copy what it needs
  // from `state` now and then, never block.
  virtual void AfterPass(const ClusterState& state, Duration pass) = 0;
  // On the committer thread, no lock held: one store transaction took
  // `write` and left the log as `log` says.
  virtual void AfterCommit(Duration write, const StoreLog& log) = 0;
};

}  // namespace athanor::coord
