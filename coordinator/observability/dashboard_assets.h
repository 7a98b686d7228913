// The dashboard's pages, script and style sheet, embedded in the binary at
// build time from coordinator/observability/dashboard/ (CMake writes dashboard_assets.cc),
// so a coordinator serves its dashboard with nothing installed beside it.
#pragma once

#include <string_view>

namespace athanor::coord {

// The embedded file `name` (e.g. "index.html"); empty when there is none.
std::string_view DashboardAsset(std::string_view name);

}  // namespace athanor::coord
