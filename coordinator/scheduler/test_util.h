// Builders shared by the scheduler tests.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::sched::testing {

inline NodeSpec MakeNode(const std::string& name, int gpus, const std::string& model = "H100",
                         const std::string& sw = "", const std::string& rack = "") {
  NodeSpec spec;
  spec.name = name;
  spec.gpus = gpus;
  spec.gpu_model = model;
  spec.gpu_memory_mb = 80000;
  spec.cpus = 64;
  spec.memory_mb = 512000;
  if (!sw.empty()) spec.labels["switch"] = sw;
  if (!rack.empty()) spec.labels["rack"] = rack;
  return spec;
}

inline JobRequest MakeJob(const std::string& id, int nodes, int gpus_per_node,
                          const std::string& tenant = "t", int priority = 0) {
  JobRequest job;
  job.id = id;
  job.tenant = tenant;
  job.priority = priority;
  job.nodes = nodes;
  job.gpus_per_node = gpus_per_node;
  return job;
}

// "node:ids" strings of a start decision's placement, e.g. {"n1:0,1"}.
inline std::vector<std::string> Where(const Decision& d) {
  std::vector<std::string> out;
  for (const auto& alloc : d.placement) {
    out.push_back(absl::StrCat(alloc.node, ":", absl::StrJoin(alloc.gpu_ids, ",")));
  }
  return out;
}

}  // namespace athanor::sched::testing
