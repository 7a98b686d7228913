#include "coordinator/core/cluster_volumes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {

absl::Status ClusterVolumes::Restore(std::vector<rpc::Volume> volumes) {
  return state_.volumes_.Restore(std::move(volumes));
}

absl::StatusOr<rpc::Volume> ClusterVolumes::Create(const std::string& tenant, const std::string& name,
                                                   int64_t size_limit_bytes, const VolumeQuota& quota) {
  ASSIGN_OR_RETURN(rpc::Volume v, state_.volumes_.Create(tenant, name, size_limit_bytes, quota,
                                                         state_.clock_.UnixSeconds()));
  state_.log_.MarkVolume(v, /*removed=*/false);
  return v;
}

absl::StatusOr<rpc::Volume> ClusterVolumes::Remove(const std::string& tenant, const std::string& name) {
  if (state_.volumes_.Find(tenant, name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("tenant ", tenant, " has no volume '", name, "'"));
  }
  std::vector<std::string> users = UsersOf(Uses(state_), tenant, name);
  if (!users.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("volume '", name, "' is mounted by job ",
                                                      absl::StrJoin(users, ", job "),
                                                      " (queued or running): cancel or wait for them first"));
  }
  ASSIGN_OR_RETURN(rpc::Volume v, state_.volumes_.Remove(tenant, name));
  state_.log_.MarkVolume(v, /*removed=*/true);
  return v;
}

absl::StatusOr<rpc::Volume> ClusterVolumes::Snapshot(const std::string& tenant, const std::string& name,
                                                     const std::string& snapshot) {
  ASSIGN_OR_RETURN(rpc::Volume v, state_.volumes_.Snapshot(tenant, name, snapshot, state_.clock_.UnixSeconds()));
  state_.log_.MarkVolume(v, /*removed=*/false);
  return v;
}

absl::Status ClusterVolumes::CheckSubmit(const JobSpec& spec, const std::string& key) const {
  if (spec.volumes.empty()) return absl::OkStatus();
  // Malformed mounts are InvalidArgument (JobLifecycle::Submit's own check),
  // never "no such volume".
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  if (!key.empty()) {
    for (const auto& [seq, job] : state_.jobs_.all()) {
      if (job.spec.tenant == spec.tenant && job.idempotency_key == key) return absl::OkStatus();
    }
  }
  return CheckMounts(state_.volumes_, spec, Uses(state_));
}

absl::StatusOr<const JobRecord*> ClusterVolumes::PlacedMount(const ClusterState& state, const std::string& node,
                                                             const std::string& job_id, int32_t attempt,
                                                             const std::string& volume, bool write) {
  const JobRecord* job = state.jobs_.Find(job_id);
  const auto denied = [&](const std::string& why) {
    return absl::PermissionDeniedError(absl::StrCat("node ", node, " may not ", write ? "store" : "fetch",
                                                    " volume '", volume, "' for job ", job_id, " attempt ",
                                                    attempt, ": ", why));
  };
  if (job == nullptr) return denied("no such job");
  if (attempt < 1 || attempt > job->attempt || static_cast<size_t>(attempt) > job->attempt_nodes.size()) {
    return denied("no such attempt");
  }
  const std::vector<std::string>& nodes = job->attempt_nodes[attempt - 1];
  // "" : --insecure, where no call proves a node.
  if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
    return denied("the attempt has no rank there");
  }
  for (const VolumeMount& m : job->spec.volumes) {
    if (m.name != volume) continue;
    if (write && m.read_only) return denied("the job mounts it read-only");
    return job;
  }
  return denied("the job does not mount it");
}

absl::StatusOr<rpc::Volume> ClusterVolumes::ForFetch(const ClusterState& state, const std::string& node,
                                                     const std::string& job_id, int32_t attempt,
                                                     const std::string& volume) {
  ASSIGN_OR_RETURN(const JobRecord* job, PlacedMount(state, node, job_id, attempt, volume, /*write=*/false));
  if (IsTerminal(job->state) || attempt != job->attempt) {
    return absl::PermissionDeniedError(absl::StrCat("node ", node, " may not fetch volume '", volume, "' for job ",
                                                    job_id, " attempt ", attempt, ": the attempt is over"));
  }
  const rpc::Volume* v = state.volumes_.Find(job->spec.tenant, volume);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("tenant ", job->spec.tenant, " has no volume '", volume, "'"));
  return *v;
}

absl::StatusOr<VolumeUpload> ClusterVolumes::ReserveStore(const std::string& node, const std::string& job_id,
                                                          int32_t attempt, const std::string& volume,
                                                          int64_t base_generation) {
  // A finished attempt may still store: its box syncs up after its last rank ended.
  ASSIGN_OR_RETURN(const JobRecord* job, PlacedMount(state_, node, job_id, attempt, volume, /*write=*/true));
  VolumeUpload up;
  up.tenant = job->spec.tenant;
  ASSIGN_OR_RETURN(up.generation, state_.volumes_.ReserveGeneration(up.tenant, volume, base_generation));
  up.size_limit_bytes = state_.volumes_.Find(up.tenant, volume)->size_limit_bytes();
  return up;
}

absl::StatusOr<rpc::Volume> ClusterVolumes::CommitStore(const std::string& volume, const VolumeUpload& upload,
                                                        int64_t base_generation, const std::string& digest,
                                                        int64_t size_bytes) {
  ASSIGN_OR_RETURN(rpc::Volume v,
                   state_.volumes_.CommitGeneration(upload.tenant, volume, base_generation, upload.generation, digest,
                                                    size_bytes, state_.clock_.UnixSeconds()));
  state_.log_.MarkVolume(v, /*removed=*/false);
  return v;
}

absl::Status ClusterVolumes::EndStore(const std::string& node, const std::string& job_id, int32_t attempt,
                                      const std::string& volume) {
  ASSIGN_OR_RETURN(const JobRecord* job, PlacedMount(state_, node, job_id, attempt, volume, /*write=*/true));
  state_.snapshots().VolumeStored(job_id, attempt, volume);  // a reclaimed instance's snapshot keeps it
  if (!state_.owed_stores_.Reported(node, job_id, attempt, volume)) {
    // The agent stores as the ranks end; the coordinator may not have seen
    // them end yet.
    if (job->allocated && job->attempt == attempt) state_.owed_stores_.EndedEarly(node, job_id, attempt, volume);
    return absl::OkStatus();
  }
  ATHANOR_LOG(INFO) << "job " << job_id << ": attempt " << attempt << "'s store of volume '" << volume
                    << "' from node " << (node.empty() ? "?" : node) << " ended"
                    << (state_.owed_stores_.First(job_id) ? "" : "; its next attempt may start");
  state_.ScheduleInline();
  return absl::OkStatus();
}

void ClusterVolumes::NodeLost(const std::string& node, const std::string& why) {
  for (const OwedStores::Owed& o : state_.owed_stores_.NodeLost(node)) {
    ATHANOR_LOG(WARNING) << "job " << o.job_id << ": attempt " << o.attempt << "'s copy of volume '" << o.volume
                         << "' on node " << node << " is lost (" << why << "); the volume keeps its last "
                         << "stored content, and the next attempt no longer waits for it";
  }
}

std::map<std::string, std::string> ClusterVolumes::Holds() {
  std::map<std::string, std::string> out;
  OwedStores& owed = state_.owed_stores_;
  if (owed.Jobs().empty()) return out;
  const TimePoint now = state_.clock_.Now();
  for (const OwedStores::Owed& o : owed.Expire(now)) {
    ATHANOR_LOG(WARNING) << "job " << o.job_id << ": attempt " << o.attempt << " did not store volume '" << o.volume
                         << "' from node " << o.node << " within " << ToSeconds(owed.max_wait())
                         << " s; the next attempt no longer waits for it (it starts from the volume's last "
                         << "stored content)";
  }
  for (const std::string& id : owed.Jobs()) {
    const JobRecord* job = state_.jobs_.Find(id);
    if (job == nullptr || IsTerminal(job->state)) {
      owed.Forget(id);
      continue;
    }
    const std::optional<OwedStores::Owed> o = owed.First(id);
    out[id] = absl::StrCat("waiting for volume '", o->volume, "' to be synced from node ", o->node,
                           " (stored back by attempt ", o->attempt, "); gives up in ",
                           static_cast<int64_t>(ToSeconds(o->until - now) + 0.999), " s");
  }
  return out;
}

std::vector<rpc::Volume> ClusterVolumes::List(const ClusterState& state, const std::string& tenant) {
  std::vector<rpc::Volume> out = state.volumes_.List(tenant);
  const std::vector<VolumeUse> uses = Uses(state);
  for (rpc::Volume& v : out) {
    for (std::string& id : UsersOf(uses, v.tenant(), v.name())) v.add_used_by(std::move(id));
  }
  return out;
}

std::vector<VolumeUse> ClusterVolumes::Uses(const ClusterState& state) {
  std::vector<VolumeUse> out;
  for (const auto& [seq, job] : state.jobs_.all()) {
    if (job.spec.volumes.empty() || IsTerminal(job.state)) continue;
    out.push_back({job.id, job.spec.tenant, job.spec.volumes});
  }
  return out;
}

}  // namespace athanor::coord
