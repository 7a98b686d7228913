// AttemptLauncher: turns a placement into an attempt of a job (ranks laid
// out node-major, a MASTER_PORT, the env contract: docs/architecture.md,
// "The env contract") and says which ranks a node should run.
//
// Not thread-safe: confined to ClusterState's owner. Options, node table and
// clock are not owned and outlive it.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "coordinator/core/job_network.h"
#include "coordinator/core/node_table.h"
#include "coordinator/model/change_log.h"
#include "coordinator/model/state_types.h"
#include "coordinator/model/wall_clock.h"
#include "coordinator/scheduler/types.h"

namespace athanor::coord {

class AttemptLauncher {
 public:
  AttemptLauncher(const StateOptions* options, const NodeTable* nodes, ChangeLog* log,
                  const WallClock* clock)
      : options_(options), nodes_(nodes), log_(log), clock_(clock), networks_(options->job_network) {}

  // Starts the job's next attempt on `placement` (one entry per node, in
  // node-rank order, except that the first node not in the job's
  // master_port_taken_on becomes node 0, rank 0's): STARTING, allocation,
  // ranks, master address and the range's next free port; with
  // --job-network, the attempt's /24, and MASTER_ADDR is rank 0's address in it.
  void Start(JobRecord* job, const std::vector<sched::NodeAllocation>& placement);
  // The attempt's GPUs are held again after a restart (its port is in use).
  void Restore(const JobRecord& job) {
    Hold(job.master_port);
    networks_.Hold(job.network_subnet);
  }
  // The attempt released its GPUs: its port and its /24 are free.
  void Release(const JobRecord& job);
  // Appends the ranks of `job` placed on `node`, with their environment.
  void AppendDesired(const JobRecord& job, const std::string& node,
                     std::vector<DesiredRank>* out) const;

 private:
  // The next free port of --master-port-range after the last one chosen
  // (O(log n)); the range's first port, shared, when every one is taken.
  int32_t ChoosePort();
  void Hold(int32_t port);
  void FillPool();
  // The attempt's network as node rank `node_rank` sees it.
  JobNetworkView NetworkView(const JobRecord& job, int32_t node_rank) const;

  const StateOptions* const options_;
  const NodeTable* const nodes_;
  ChangeLog* const log_;
  const WallClock* const clock_;
  JobNetworks networks_;  // the /24s held by live attempts (--job-network)
  // Holders per port (several share the range's first port once every one
  // is taken): O(1) to release, however many share it.
  absl::flat_hash_map<int32_t, int32_t> port_holders_;
  std::set<int32_t> free_ports_;         // in the range, held by nobody
  bool pool_filled_ = false;
  int32_t port_cursor_ = 0;
};

}  // namespace athanor::coord
