#include "coordinator/core/cluster_admin.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {

absl::StatusOr<NodeView> ClusterAdmin::DrainNode(const std::string& name, Duration grace,
                                                 const std::string& reason) {
  const std::string why = reason.empty() ? "drained by an admin" : reason;
  RETURN_IF_ERROR(state_.nodes_.Drain(name, why));
  state_.jobs_.PreemptAttemptsOn(name, grace, absl::StrCat("node ", name, " is draining (", why, ")"));
  return *state_.nodes_.View(name);
}

absl::StatusOr<NodeView> ClusterAdmin::UndrainNode(const std::string& name) {
  RETURN_IF_ERROR(state_.nodes_.Undrain(name));
  state_.ScheduleInline();
  return *state_.nodes_.View(name);
}

absl::Status ClusterAdmin::SetQuota(const std::string& tenant, int32_t gpus) {
  RETURN_IF_ERROR(state_.accounts_.SetQuota(tenant, gpus));
  state_.ScheduleInline();
  return absl::OkStatus();
}

}  // namespace athanor::coord
