// ClusterVolumes: tenants' volumes on the cluster state. A facet of
// ClusterState (ClusterState::volumes()), like ClusterBilling: the registry
// (volumes/volume_registry.h) wired to the jobs that mount its volumes and to
// the ChangeLog, so that every record it changes is durable in the same
// commit as the operation (docs/operations.md, "Volumes").
//
//   - Create / Remove / Snapshot: the Volumes service's commands; Remove is
//     refused while a queued or running job mounts the volume.
//   - CheckSubmit: the mount rules (volumes/volume_mounts.h), run by
//     ClusterState::SubmitJob before the job is queued.
//   - ForFetch / ReserveStore / CommitStore: agents' content calls
//     (NodeData.FetchVolume, StoreVolume), each only for an attempt of a job
//     placed on the asking node that mounts the volume (read-write to store).
//
// Not thread-safe, as ClusterState: the owner serialises calls. Holds the
// state by reference: use it at once, never keep it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/types.h"
#include "coordinator/volumes/volume_mounts.h"
#include "coordinator/volumes/volume_registry.h"
#include "proto/athanor_data.pb.h"

namespace athanor::coord {

class ClusterState;

// What an agent's StoreVolume may write: the volume's limit and the
// generation number its blob takes.
struct VolumeUpload {
  std::string tenant;
  int64_t size_limit_bytes = 0;
  int64_t generation = 0;  // reserved (VolumeRegistry::ReserveGeneration)
};

class ClusterVolumes {
 public:
  explicit ClusterVolumes(ClusterState& state) : state_(state) {}

  // The store's rows after a restart (VolumeRegistry::Restore).
  absl::Status Restore(std::vector<rpc::Volume> volumes);

  absl::StatusOr<rpc::Volume> Create(const std::string& tenant, const std::string& name,
                                     int64_t size_limit_bytes, const VolumeQuota& quota);
  // FailedPrecondition naming the jobs while queued or running jobs mount
  // it; NotFound. The removed record (its blobs are the caller's to delete).
  absl::StatusOr<rpc::Volume> Remove(const std::string& tenant, const std::string& name);
  absl::StatusOr<rpc::Volume> Snapshot(const std::string& tenant, const std::string& name,
                                       const std::string& snapshot);

  // The mount rules for `spec` (its tenant filled in); OK for a spec without
  // volumes and for a repeated idempotency key (the first job stands).
  absl::Status CheckSubmit(const JobSpec& spec, const std::string& key) const;

  // Agents. PermissionDenied unless attempt `attempt` of job `job_id` is
  // placed on `node` ("" : any node, for --insecure) and mounts `volume` (read-write for a store); a fetch
  // only for the job's current attempt while it is queued or running. The
  // volume's record, to send its current content.
  static absl::StatusOr<rpc::Volume> ForFetch(const ClusterState& state, const std::string& node,
                                              const std::string& job_id, int32_t attempt,
                                              const std::string& volume);
  // Aborted when `base_generation` is not the volume's generation.
  absl::StatusOr<VolumeUpload> ReserveStore(const std::string& node, const std::string& job_id,
                                            int32_t attempt, const std::string& volume,
                                            int64_t base_generation);
  // The uploaded blob of `upload.generation` is the volume's content now
  // (VolumeRegistry::CommitGeneration's errors).
  absl::StatusOr<rpc::Volume> CommitStore(const std::string& volume, const VolumeUpload& upload,
                                          int64_t base_generation, const std::string& digest,
                                          int64_t size_bytes);

  // Volume stores owed by requeued jobs' ended attempts (volumes/owed_stores.h).
  // A StoreVolume call by attempt `attempt` of `job_id` from `node` ended,
  // whatever its outcome (a call of no content: the copy was unchanged, or
  // could not be stored). PermissionDenied as ReserveStore; a job that may
  // start now is placed.
  absl::Status EndStore(const std::string& node, const std::string& job_id, int32_t attempt,
                        const std::string& volume);
  // `node`'s copies are lost (`why`): what it owed is dropped.
  void NodeLost(const std::string& node, const std::string& why);
  // The requeued jobs that must wait for owed stores now, and why (job id ->
  // why, for UploadHolds::Refresh); drops debts past
  // StateOptions::volume_store_wait and those of finished jobs.
  std::map<std::string, std::string> Holds();

  // ---- reads, over a const state.
  // One tenant's volumes ("" : every tenant's), `used_by` filled in.
  static std::vector<rpc::Volume> List(const ClusterState& state, const std::string& tenant);
  // The queued and running jobs' mounts, by submission.
  static std::vector<VolumeUse> Uses(const ClusterState& state);

 private:
  // The job whose attempt `attempt` ran on `node` and mounts `volume`.
  static absl::StatusOr<const JobRecord*> PlacedMount(const ClusterState& state, const std::string& node,
                                                      const std::string& job_id, int32_t attempt,
                                                      const std::string& volume, bool write);

  ClusterState& state_;
};

}  // namespace athanor::coord
