#include "coordinator/core/job_request.h"

namespace athanor::coord {

Duration GraceOf(const JobRecord& job, const StateOptions& options) {
  return job.spec.grace_period_s > 0 ? Seconds(static_cast<double>(job.spec.grace_period_s))
                                     : options.default_grace;
}

sched::JobRequest ToSchedRequest(const JobRecord& job, const StateOptions& options) {
  sched::JobRequest r;
  r.id = job.id;
  r.tenant = job.spec.tenant;
  r.priority = job.spec.priority;
  r.preemptible = job.spec.preemptible;
  r.nodes = job.spec.nodes;
  r.min_nodes = job.spec.elastic() ? job.spec.min_nodes : 0;
  r.gpus_per_node = job.spec.gpus_per_node;
  r.gpu_model = job.spec.gpu_model;
  r.min_gpu_memory_mb = job.spec.min_gpu_memory_mb;
  r.cpus_per_node = job.spec.cpus_per_node;
  r.memory_mb_per_node = job.spec.memory_mb_per_node;
  r.time_limit = Seconds(static_cast<double>(job.spec.time_limit_s));
  r.grace = GraceOf(job, options);
  r.submit_seq = static_cast<uint64_t>(job.seq);
  r.avoid_nodes = job.avoid_nodes;
  r.image_digest = job.image_digest;
  return r;
}

std::vector<sched::NodeAllocation> ToSchedPlacement(const JobRecord& job) {
  std::vector<sched::NodeAllocation> placement;
  for (const RankPlacement& p : job.allocation) {
    if (placement.empty() || placement.back().node != p.node) placement.push_back({p.node, {}});
    for (int32_t g : p.gpu_ids) placement.back().gpu_ids.push_back(g);
  }
  return placement;
}

}  // namespace athanor::coord
