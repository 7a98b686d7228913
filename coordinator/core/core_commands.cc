#include "coordinator/core/core_commands.h"

#include "absl/functional/function_ref.h"
#include "common/status.h"

namespace athanor::coord {
namespace {

// `op`'s answer once what it changed is durable; its error, else the commit's.
template <typename T>
absl::StatusOr<T> Run(CoordinatorCore* core, absl::FunctionRef<absl::StatusOr<T>(ClusterState&)> op) {
  absl::StatusOr<T> out = absl::UnknownError("not run");
  RETURN_IF_ERROR(core->Write([&](ClusterState& s) {
    out = op(s);
    return out.status();
  }));
  return out;
}

}  // namespace

absl::StatusOr<JobRecord> CoreCommands::CancelJob(const std::string& id) {
  return Run<JobRecord>(core_, [&](ClusterState& s) { return s.CancelJob(id); });
}

absl::StatusOr<JobRecord> CoreCommands::NoteActivity(const std::string& id, const std::string& signal,
                                                    const std::string& detail) {
  return Run<JobRecord>(core_, [&](ClusterState& s) { return s.jobs().NoteActivity(id, signal, detail); });
}

absl::StatusOr<JobRecord> CoreCommands::PreemptJob(const std::string& id, Duration grace) {
  return Run<JobRecord>(core_, [&](ClusterState& s) { return s.jobs().Preempt(id, grace); });
}

absl::StatusOr<NodeView> CoreCommands::DrainNode(const std::string& name, Duration grace,
                                                 const std::string& reason) {
  return Run<NodeView>(core_, [&](ClusterState& s) { return s.admin().DrainNode(name, grace, reason); });
}

absl::StatusOr<NodeView> CoreCommands::UndrainNode(const std::string& name) {
  return Run<NodeView>(core_, [&](ClusterState& s) { return s.admin().UndrainNode(name); });
}

absl::StatusOr<std::vector<QuotaRow>> CoreCommands::SetQuota(const std::string& tenant, int32_t gpus) {
  return Run<std::vector<QuotaRow>>(core_, [&](ClusterState& s) -> absl::StatusOr<std::vector<QuotaRow>> {
    RETURN_IF_ERROR(s.admin().SetQuota(tenant, gpus));
    return s.accounts().Quotas();
  });
}

}  // namespace athanor::coord
