// VolumeRegistry: every tenant's volumes, keyed by (tenant, name). A volume's
// record is rpc::Volume (proto/athanor_data.proto) itself, as kept in the
// state database's `volumes` table: one definition, no mapping.
//
// A volume's content is one tar in the coordinator's data store, replaced as
// a whole: each sync up writes a new generation's blob (BlobKey), commits the
// record's new generation, digest and size (CommitGeneration), then deletes
// the old blob unless a snapshot still references it (Referenced). The
// registry only decides; the caller (core/cluster_volumes.h) marks what
// changed for the store, and the service (rpc/volumes_service.h) moves blobs.
//
// Pure; not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/athanor_data.pb.h"

namespace athanor::coord {

// What one tenant may hold: the sum of its volumes' size limits and their
// count (TenantPolicy.max_volume_bytes / max_volumes, else the flags).
struct VolumeQuota {
  int64_t max_bytes = int64_t{1} << 40;  // --volume-quota-bytes: 1 TiB
  int32_t max_count = 100;               // --volume-quota-count
};

// A volume's size limit is at most 1 PiB (so that a tenant's sum cannot
// overflow); a volume keeps at most this many snapshots.
inline constexpr int64_t kMaxVolumeBytes = int64_t{1} << 50;
inline constexpr int kMaxSnapshotsPerVolume = 100;

// Where generation `generation`'s tar of a volume lives in the data store:
// volumes/<tenant>/<name>/<generation>.tar.
std::string VolumeBlobKey(const std::string& tenant, const std::string& name, int64_t generation);

class VolumeRegistry {
 public:
  // The store's rows, after a restart. InvalidArgument naming a row whose
  // name or tenant does not validate, or a duplicate.
  absl::Status Restore(std::vector<rpc::Volume> volumes);

  // nullptr when `tenant` has no volume `name`.
  const rpc::Volume* Find(const std::string& tenant, const std::string& name) const;
  // One tenant's volumes by name ("" : every tenant's, by tenant then name).
  std::vector<rpc::Volume> List(const std::string& tenant) const;

  // A new, empty volume (generation 0). InvalidArgument for a bad name or a
  // size limit not in (0, 1 PiB]; AlreadyExists; ResourceExhausted naming
  // the quota the tenant would pass.
  absl::StatusOr<rpc::Volume> Create(const std::string& tenant, const std::string& name,
                                     int64_t size_limit_bytes, const VolumeQuota& quota,
                                     int64_t now_unix);
  // Forgets the volume; NotFound. The caller refuses first while jobs
  // mount it (volume_mounts.h) and deletes its blobs afterwards.
  absl::StatusOr<rpc::Volume> Remove(const std::string& tenant, const std::string& name);
  // A snapshot named `snapshot` of the current generation (a record
  // referencing the same blob). NotFound; InvalidArgument for a bad name;
  // AlreadyExists for a snapshot name in use; ResourceExhausted past
  // kMaxSnapshotsPerVolume.
  absl::StatusOr<rpc::Volume> Snapshot(const std::string& tenant, const std::string& name,
                                       const std::string& snapshot, int64_t now_unix);

  // Forgets the snapshot `snapshot` (an instance snapshot's, dropped with
  // it). NotFound. The record after; the caller deletes the snapshot's blob
  // unless Referenced still.
  absl::StatusOr<rpc::Volume> DropSnapshot(const std::string& tenant, const std::string& name,
                                           const std::string& snapshot);

  // A number for the blob of the next generation of a volume whose content
  // is at `base_generation`: above every generation committed or handed out
  // before (by this process), so that two uploads never write the same key.
  // NotFound; Aborted when `base_generation` is not the current one.
  absl::StatusOr<int64_t> ReserveGeneration(const std::string& tenant, const std::string& name,
                                            int64_t base_generation);
  // The blob of `generation` (reserved above) holds the volume's content
  // now. NotFound (the volume was removed meanwhile); Aborted when the
  // volume moved past `base_generation` meanwhile; ResourceExhausted when
  // `size_bytes` passes the size limit.
  absl::StatusOr<rpc::Volume> CommitGeneration(const std::string& tenant, const std::string& name,
                                               int64_t base_generation, int64_t generation,
                                               const std::string& digest, int64_t size_bytes,
                                               int64_t now_unix);

  // Whether `volume`'s current content or one of its snapshots is `generation`.
  static bool Referenced(const rpc::Volume& volume, int64_t generation);
  // Every blob generation `volume` references (current and snapshots', > 0).
  static std::vector<int64_t> Blobs(const rpc::Volume& volume);

 private:
  using Key = std::pair<std::string, std::string>;  // (tenant, name)
  rpc::Volume* Mutable(const std::string& tenant, const std::string& name);

  std::map<Key, rpc::Volume> volumes_;
  std::map<Key, int64_t> reserved_;  // the newest generation handed out
};

}  // namespace athanor::coord
