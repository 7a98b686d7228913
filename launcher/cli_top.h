// `athanor top`: a live view of the cluster in a terminal (cli_top.cc), from
// the coordinator's published cluster view (Observability.GetClusterView,
// the data the dashboard shows). RenderTop is the pure part: one frame of
// exactly `height` lines, none wider than `width` columns.
#pragma once

#include <string>
#include <vector>

#include "proto/athanor.pb.h"

namespace athanor::cli {

std::vector<std::string> RenderTop(const rpc::ClusterView& view, const std::string& coordinator,
                                   int width, int height);

}  // namespace athanor::cli
