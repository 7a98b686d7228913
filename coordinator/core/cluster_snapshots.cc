#include "coordinator/core/cluster_snapshots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/cluster_state.h"

namespace athanor::coord {
namespace {

// The instance's request as --resume/--restore reuse it: its shape, image
// and volumes (the command and environment too, shown by `athanor snapshots`).
rpc::JobSpec RequestOf(const JobSpec& spec) {
  rpc::JobSpec out;
  out.set_name(spec.name);
  out.set_tenant(spec.tenant);
  out.set_nodes(spec.nodes);
  out.set_gpus_per_node(spec.gpus_per_node);
  for (const std::string& c : spec.command) out.add_command(c);
  out.set_gpu_model(spec.gpu_model);
  out.set_cpus_per_node(spec.cpus_per_node);
  out.set_memory_mb_per_node(spec.memory_mb_per_node);
  out.set_interactive(spec.interactive);
  out.set_idle_timeout_s(spec.idle_timeout_s);
  out.set_image(spec.image);
  out.set_notebook(spec.notebook);
  for (const VolumeMount& m : spec.volumes) {
    rpc::VolumeMount* v = out.add_volumes();
    v->set_name(m.name);
    v->set_path(m.path);
    v->set_read_only(m.read_only);
  }
  return out;
}

absl::Status Denied(const std::string& node, const std::string& what, const std::string& job_id, int32_t attempt,
                    int32_t rank, const std::string& why) {
  return absl::PermissionDeniedError(absl::StrCat("node ", node, " may not ", what, " the work folder of job ", job_id,
                                                  " attempt ", attempt, " rank ", rank, ": ", why));
}

// The rank's placement in `job`'s newest attempt on `node` ("" : any).
absl::Status Placed(const JobRecord& job, const std::string& node, int32_t attempt, int32_t rank,
                    const std::string& what) {
  if (attempt != job.attempt || attempt < 1) return Denied(node, what, job.id, attempt, rank, "not the job's newest attempt");
  for (const RankPlacement& p : job.allocation) {
    if (p.rank != rank) continue;
    if (!node.empty() && p.node != node) return Denied(node, what, job.id, attempt, rank, "the rank ran elsewhere");
    return absl::OkStatus();
  }
  return Denied(node, what, job.id, attempt, rank, "no such rank");
}

}  // namespace

absl::Status ClusterSnapshots::Restore(std::vector<rpc::InstanceSnapshot> rows) {
  return state_.snapshots_.Restore(std::move(rows));
}

absl::StatusOr<rpc::InstanceSnapshot> ClusterSnapshots::Take(const JobRecord& job, const std::string& reason) {
  std::vector<rpc::VolumeSnapshotRef> volumes;
  for (const VolumeMount& m : job.spec.volumes) {
    rpc::VolumeSnapshotRef v;
    v.set_volume(m.name);
    v.set_path(m.path);
    v.set_read_only(m.read_only);
    volumes.push_back(std::move(v));
  }
  std::vector<rpc::InstanceSnapshot> evicted;
  ASSIGN_OR_RETURN(rpc::InstanceSnapshot s,
                   state_.snapshots_.Begin(job.spec.tenant, job.id, static_cast<int32_t>(job.allocation.size()),
                                           std::move(volumes), RequestOf(job.spec), reason,
                                           state_.clock_.UnixSeconds(), state_.options_.snapshot_keep, &evicted));
  state_.log_.MarkSnapshot(s, /*removed=*/false);
  for (const rpc::InstanceSnapshot& old : evicted) {
    ATHANOR_LOG(INFO) << "snapshot " << old.id() << " of tenant " << old.tenant() << " dropped: the tenant keeps "
                      << state_.options_.snapshot_keep << " (--snapshot-keep)";
    state_.log_.MarkSnapshot(old, /*removed=*/true);
    Release(old);
  }
  ATHANOR_LOG(INFO) << "job " << job.id << ": snapshot " << s.id() << " begun (" << reason << ")";
  return s;
}

void ClusterSnapshots::Annotate(const ClusterState& state, const JobRecord& job, DesiredRank* d) {
  if (job.stopping) {
    const rpc::InstanceSnapshot* s = state.snapshots_.Pending(job.id);
    if (s != nullptr && d->rank >= 0 && d->rank < s->workdir_keys_size() && s->workdir_keys(d->rank).empty()) {
      d->snapshot_key = SnapshotWorkdirKey(s->tenant(), s->id(), d->rank);
    }
  }
  if (!job.spec.restore_snapshot.empty()) {
    const rpc::InstanceSnapshot* s = state.snapshots_.Find(job.spec.restore_snapshot);
    if (s != nullptr && s->tenant() == job.spec.tenant && d->rank >= 0 && d->rank < s->workdir_keys_size()) {
      d->restore_key = s->workdir_keys(d->rank);
    }
  }
}

absl::Status ClusterSnapshots::CheckSubmit(const JobSpec& spec) const {
  if (spec.restore_snapshot.empty()) return absl::OkStatus();
  const rpc::InstanceSnapshot* s = state_.snapshots_.Find(spec.restore_snapshot);
  if (s == nullptr || s->tenant() != spec.tenant) {
    return absl::NotFoundError(absl::StrCat("tenant ", spec.tenant, " has no snapshot '", spec.restore_snapshot, "'"));
  }
  if (!s->complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot ", s->id(), " is not complete (its work folders or volumes are still being stored, or their "
        "node was lost); see `athanor snapshots`"));
  }
  if (!spec.interactive) {
    return absl::InvalidArgumentError("restore_snapshot: only an interactive allocation (athanor alloc) restores a "
                                      "snapshot: its ranks' work folders are where the state goes");
  }
  for (const rpc::VolumeSnapshotRef& ref : s->volumes()) {
    if (ref.read_only()) continue;
    const auto mount = std::find_if(spec.volumes.begin(), spec.volumes.end(),
                                    [&](const VolumeMount& m) { return m.name == ref.volume(); });
    if (mount == spec.volumes.end() || mount->path != ref.path() || mount->read_only) {
      return absl::InvalidArgumentError(absl::StrCat("snapshot ", s->id(), " holds volume '", ref.volume(), "' at ",
                                                     ref.path(), " read-write; mount it the same way (or give no "
                                                     "--volume, to take the snapshot's)"));
    }
    const rpc::Volume* v = state_.volumes_.Find(spec.tenant, ref.volume());
    if (v == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("snapshot ", s->id(), " holds volume '", ref.volume(),
                                                        "', which was removed since"));
    }
    const auto kept = std::find_if(v->snapshots().begin(), v->snapshots().end(),
                                   [&](const rpc::VolumeSnapshot& vs) { return vs.name() == ref.snapshot(); });
    if (kept == v->snapshots().end() || kept->generation() != v->generation()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume '", ref.volume(), "' changed since snapshot ", s->id(), " was taken (generation ",
          kept == v->snapshots().end() ? -1 : kept->generation(), " then, ", v->generation(),
          " now): the instance would not see the state the snapshot holds. The volume's snapshot '",
          ref.snapshot(), "' keeps that content"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkdirUpload> ClusterSnapshots::ForStore(const ClusterState& state, const std::string& node,
                                                         const std::string& job_id, int32_t attempt, int32_t rank,
                                                         const std::string& key) {
  const JobRecord* job = state.jobs_.Find(job_id);
  if (job == nullptr) return Denied(node, "store", job_id, attempt, rank, "no such job");
  RETURN_IF_ERROR(Placed(*job, node, attempt, rank, "store"));
  const rpc::InstanceSnapshot* s = state.snapshots_.Pending(job_id);
  if (s == nullptr || rank >= s->workdir_keys_size() || !s->workdir_keys(rank).empty() ||
      key != SnapshotWorkdirKey(s->tenant(), s->id(), rank)) {
    return Denied(node, "store", job_id, attempt, rank, absl::StrCat("'", key, "' is not a key it was handed"));
  }
  return WorkdirUpload{s->id(), s->tenant()};
}

absl::StatusOr<rpc::InstanceSnapshot> ClusterSnapshots::WorkdirStored(const std::string& snapshot_id, int32_t rank,
                                                                      int64_t size_bytes) {
  ASSIGN_OR_RETURN(rpc::InstanceSnapshot s, state_.snapshots_.WorkdirStored(snapshot_id, rank, size_bytes));
  state_.log_.MarkSnapshot(s, /*removed=*/false);
  if (s.complete()) ATHANOR_LOG(INFO) << "snapshot " << s.id() << " is complete (" << s.size_bytes() << " bytes)";
  return s;
}

absl::Status ClusterSnapshots::ForFetch(const ClusterState& state, const std::string& node,
                                        const std::string& job_id, int32_t attempt, int32_t rank,
                                        const std::string& key) {
  const JobRecord* job = state.jobs_.Find(job_id);
  if (job == nullptr) return Denied(node, "fetch", job_id, attempt, rank, "no such job");
  if (IsTerminal(job->state)) return Denied(node, "fetch", job_id, attempt, rank, "the job has ended");
  RETURN_IF_ERROR(Placed(*job, node, attempt, rank, "fetch"));
  DesiredRank d;
  d.rank = rank;
  Annotate(state, *job, &d);
  if (key.empty() || key != d.restore_key) {
    return Denied(node, "fetch", job_id, attempt, rank, absl::StrCat("'", key, "' is not the rank's restore key"));
  }
  return absl::OkStatus();
}

void ClusterSnapshots::VolumeStored(const std::string& job_id, int32_t attempt, const std::string& volume) {
  const JobRecord* job = state_.jobs_.Find(job_id);
  const rpc::InstanceSnapshot* s = state_.snapshots_.Pending(job_id);
  if (job == nullptr || s == nullptr || attempt != job->attempt) return;
  const auto ref = std::find_if(s->volumes().begin(), s->volumes().end(),
                                [&](const rpc::VolumeSnapshotRef& r) { return r.volume() == volume; });
  if (ref == s->volumes().end() || ref->read_only() || !ref->snapshot().empty()) return;
  const std::string id = s->id();
  const std::string tenant = s->tenant();
  absl::StatusOr<rpc::Volume> v = state_.volumes_.Snapshot(tenant, volume, id, state_.clock_.UnixSeconds());
  if (!v.ok()) {
    ATHANOR_LOG(WARNING) << "snapshot " << id << ": cannot keep volume '" << volume << "': " << v.status();
    return;
  }
  state_.log_.MarkVolume(*v, /*removed=*/false);
  absl::StatusOr<rpc::InstanceSnapshot> done = state_.snapshots_.VolumeSnapshotted(id, volume, id);
  if (!done.ok()) return;
  state_.log_.MarkSnapshot(*done, /*removed=*/false);
  ATHANOR_LOG(INFO) << "snapshot " << id << ": volume '" << volume << "' kept at generation " << v->generation()
                    << (done->complete() ? "; the snapshot is complete" : "");
}

absl::StatusOr<rpc::InstanceSnapshot> ClusterSnapshots::Remove(const std::string& tenant, const std::string& id) {
  const rpc::InstanceSnapshot* s = state_.snapshots_.Find(id);
  if (s == nullptr || (!tenant.empty() && s->tenant() != tenant)) {
    return absl::NotFoundError(absl::StrCat("no snapshot '", id, "'", tenant.empty() ? "" : " of tenant " + tenant));
  }
  ASSIGN_OR_RETURN(rpc::InstanceSnapshot out, state_.snapshots_.Remove(id));
  state_.log_.MarkSnapshot(out, /*removed=*/true);
  Release(out);
  return out;
}

void ClusterSnapshots::Release(const rpc::InstanceSnapshot& s) {
  for (int32_t r = 0; r < s.workdir_keys_size(); ++r) {
    // A pending rank's store may still land after: its key is deleted too.
    state_.snapshot_orphans_.push_back(SnapshotWorkdirKey(s.tenant(), s.id(), r));
  }
  for (const rpc::VolumeSnapshotRef& ref : s.volumes()) {
    if (ref.snapshot().empty()) continue;
    const rpc::Volume* before = state_.volumes_.Find(s.tenant(), ref.volume());
    if (before == nullptr) continue;
    int64_t generation = -1;
    for (const rpc::VolumeSnapshot& vs : before->snapshots()) {
      if (vs.name() == ref.snapshot()) generation = vs.generation();
    }
    absl::StatusOr<rpc::Volume> v = state_.volumes_.DropSnapshot(s.tenant(), ref.volume(), ref.snapshot());
    if (!v.ok()) continue;
    state_.log_.MarkVolume(*v, /*removed=*/false);
    if (generation > 0 && !VolumeRegistry::Referenced(*v, generation)) {
      state_.snapshot_orphans_.push_back(VolumeBlobKey(s.tenant(), ref.volume(), generation));
    }
  }
}

std::vector<std::string> ClusterSnapshots::TakeOrphans() { return std::exchange(state_.snapshot_orphans_, {}); }

std::vector<rpc::InstanceSnapshot> ClusterSnapshots::List(const ClusterState& state, const std::string& tenant) {
  return state.snapshots_.List(tenant);
}

}  // namespace athanor::coord
