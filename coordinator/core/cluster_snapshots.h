// ClusterSnapshots: instance snapshots on the cluster state. A facet of
// ClusterState (ClusterState::snapshots()), like ClusterVolumes: the
// registry (snapshots/snapshot_registry.h) wired to jobs, volumes and the
// ChangeLog, so that every record it changes is durable in the same commit
// as the operation (docs/operations.md, "Snapshots").
//
//   - Take: an interactive job reclaimed for idleness begins a snapshot; its
//     stopping ranks are told where their work folders go (Annotate).
//   - CheckSubmit: a job restoring a snapshot must be the tenant's own,
//     complete, and mount its read-write volumes as they were.
//   - ForStore / WorkdirStored / ForFetch: agents' work-folder calls
//     (WorkdirData), each only for the rank of the attempt on the asking node.
//   - VolumeStored: the reclaimed attempt's store of a read-write volume
//     ended; the volume's current generation is kept as a volume snapshot.
//
// Content (the data store's blobs) is the RPC layer's: Remove and Take's
// retention hand back the keys to delete (TakeOrphans).
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/types.h"
#include "proto/athanor_interactive.pb.h"

namespace athanor::coord {

class ClusterState;

// Where an agent's StoreWorkdir goes: the snapshot and its tenant.
struct WorkdirUpload {
  std::string snapshot_id;
  std::string tenant;
};

class ClusterSnapshots {
 public:
  explicit ClusterSnapshots(ClusterState& state) : state_(state) {}

  absl::Status Restore(std::vector<rpc::InstanceSnapshot> rows);

  // Begins a snapshot of `job` (allocated, interactive) for `reason`;
  // retention's dropped records' blobs go to the orphans.
  absl::StatusOr<rpc::InstanceSnapshot> Take(const JobRecord& job, const std::string& reason);
  // Fills `d`'s snapshot_key (a stopping rank of a job being snapshotted)
  // and restore_key (a rank of a job restoring a snapshot).
  static void Annotate(const ClusterState& state, const JobRecord& job, DesiredRank* d);

  // OK without spec.restore_snapshot. NotFound for a snapshot that is not
  // `spec.tenant`'s; FailedPrecondition for an incomplete one, or a volume
  // whose content moved since; InvalidArgument for a job that is not
  // interactive or does not mount the snapshot's read-write volumes at their
  // paths.
  absl::Status CheckSubmit(const JobSpec& spec) const;

  // Agents. PermissionDenied unless attempt `attempt` is job `job_id`'s
  // newest, its rank `rank` was placed on `node` ("" : any, --insecure) and
  // `key` is the key the coordinator handed that rank.
  static absl::StatusOr<WorkdirUpload> ForStore(const ClusterState& state, const std::string& node,
                                                const std::string& job_id, int32_t attempt, int32_t rank,
                                                const std::string& key);
  absl::StatusOr<rpc::InstanceSnapshot> WorkdirStored(const std::string& snapshot_id, int32_t rank,
                                                      int64_t size_bytes);
  // For a queued or running job only.
  static absl::Status ForFetch(const ClusterState& state, const std::string& node, const std::string& job_id,
                               int32_t attempt, int32_t rank, const std::string& key);
  // The reclaimed attempt `attempt` of `job_id` stored `volume` back (or
  // ended its store call): its current content is the snapshot's.
  void VolumeStored(const std::string& job_id, int32_t attempt, const std::string& volume);

  // Forgets snapshot `id` of `tenant` ("" : any, admins) and its volume
  // snapshots; NotFound. Its blobs go to the orphans.
  absl::StatusOr<rpc::InstanceSnapshot> Remove(const std::string& tenant, const std::string& id);
  // Data-store keys no record references any more, to delete.
  std::vector<std::string> TakeOrphans();

  // One tenant's ("" : every tenant's), oldest first.
  static std::vector<rpc::InstanceSnapshot> List(const ClusterState& state, const std::string& tenant);

 private:
  // Drops what `s` held: its volume snapshots (marked), its blobs (orphans).
  void Release(const rpc::InstanceSnapshot& s);

  ClusterState& state_;
};

}  // namespace athanor::coord
