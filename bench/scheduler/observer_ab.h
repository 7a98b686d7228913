// Metrics on against off on the coordinator's scheduling path, in one run:
// a ClusterState of `nodes` x 8 GPUs, full, with a queue, timed pass by
// pass with and without the CoordinatorMetrics observer that the
// coordinator's scheduler loop calls after each pass (pass histogram, and
// the cluster view rebuilt at most every 500 ms). Passes alternate off/on.
#pragma once

namespace athanor::bench {

// Prints the table; false when a setup step failed.
bool RunObserverAb(int nodes, int pending, int passes);

}  // namespace athanor::bench
