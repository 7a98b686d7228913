// Gang placement: where every rank of a job goes, all or nothing.
//
// A pure function of plain structs so the scheduling policy can be swapped
// (the real policy lives in the scheduler library); this one is first fit in
// the order nodes are given. No I/O, no threading concerns.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "coordinator/types.h"

namespace athanor::coord {

// A node as placement sees it: only nodes that may take new work are passed.
struct NodeCapacity {
  std::string name;
  int32_t total_gpus = 0;
  std::vector<int32_t> free_gpu_ids;  // ascending
};

struct PlacementRequest {
  int32_t nodes = 1;
  int32_t gpus_per_node = 1;
};

struct PlacementNode {
  std::string node;
  std::vector<int32_t> gpu_ids;  // exactly gpus_per_node of them
};

// Either one entry per node of the gang (node_rank = index), or why not.
using PlacementResult = std::variant<std::vector<PlacementNode>, std::string>;

PlacementResult PlaceGang(const PlacementRequest& request, const std::vector<NodeCapacity>& nodes);

// Why a job could never fit on these nodes (whatever runs on them), or empty
// when it could. `inventory_gpus` holds every registered node's GPU count.
std::string NeverFitsReason(const PlacementRequest& request,
                            const std::vector<int32_t>& inventory_gpus);

}  // namespace athanor::coord
