#include "coordinator/placement.h"

#include "absl/strings/str_cat.h"

namespace athanor::coord {

PlacementResult PlaceGang(const PlacementRequest& request, const std::vector<NodeCapacity>& nodes) {
  std::vector<PlacementNode> chosen;
  for (const NodeCapacity& n : nodes) {
    if (static_cast<int32_t>(chosen.size()) == request.nodes) break;
    if (static_cast<int32_t>(n.free_gpu_ids.size()) < request.gpus_per_node) continue;
    PlacementNode p;
    p.node = n.name;
    p.gpu_ids.assign(n.free_gpu_ids.begin(), n.free_gpu_ids.begin() + request.gpus_per_node);
    chosen.push_back(std::move(p));
  }
  if (static_cast<int32_t>(chosen.size()) < request.nodes) {
    return absl::StrCat("waiting for ", request.nodes, " node(s) with ", request.gpus_per_node,
                        " free GPU(s) each; ", chosen.size(), " available now");
  }
  return chosen;
}

std::string NeverFitsReason(const PlacementRequest& request,
                            const std::vector<int32_t>& inventory_gpus) {
  int32_t max_gpus = 0;
  int32_t big_enough = 0;
  for (int32_t g : inventory_gpus) {
    max_gpus = std::max(max_gpus, g);
    if (g >= request.gpus_per_node) ++big_enough;
  }
  if (request.gpus_per_node > max_gpus) {
    return absl::StrCat("gpus_per_node=", request.gpus_per_node,
                        " exceeds the largest node in the cluster (", max_gpus, " GPUs, ",
                        inventory_gpus.size(), " node(s) registered)");
  }
  if (request.nodes > big_enough) {
    return absl::StrCat("nodes=", request.nodes, " exceeds the ", big_enough,
                        " node(s) that have at least ", request.gpus_per_node, " GPUs");
  }
  return "";
}

}  // namespace athanor::coord
