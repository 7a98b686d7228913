// SnapshotRegistry: the instance snapshots of every tenant, keyed by id. A
// snapshot's record is rpc::InstanceSnapshot (proto/athanor_interactive.proto)
// itself, as kept in the state database's `snapshots` table.
//
// A snapshot is begun when an interactive instance is reclaimed (Begin): its
// id is snap-<job>-<n>, and it holds one entry per rank in `workdir_keys`,
// empty until that rank's work folder is stored (WorkdirStored sets it to
// WorkdirKey()), and one VolumeSnapshotRef per mount, whose `snapshot` a
// read-write mount gets once the attempt's store of the volume ended
// (VolumeSnapshotted). It is complete when every entry is filled.
//
// Retention: Begin keeps at most `keep` snapshots per tenant, dropping the
// oldest (by creation, then id); the caller deletes what they held.
//
// Pure; not thread-safe: confined to ClusterState's owner.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/athanor_interactive.pb.h"

namespace athanor::coord {

// Where rank `rank`'s work folder of snapshot `id` lives in the data store:
// snapshots/<tenant>/<id>/rank-<rank>.tar.
std::string SnapshotWorkdirKey(const std::string& tenant, const std::string& id, int32_t rank);

// The most ranks a snapshot records (an instance is one node's ranks at most
// in practice; the bound keeps a record small).
inline constexpr int32_t kMaxSnapshotRanks = 4096;

class SnapshotRegistry {
 public:
  // The store's rows, after a restart. InvalidArgument naming a bad row.
  absl::Status Restore(std::vector<rpc::InstanceSnapshot> rows);

  const rpc::InstanceSnapshot* Find(const std::string& id) const;
  // One tenant's ("" : every tenant's), oldest first (created, then id).
  std::vector<rpc::InstanceSnapshot> List(const std::string& tenant) const;
  // The newest incomplete snapshot of job `job_id`; nullptr when none.
  const rpc::InstanceSnapshot* Pending(const std::string& job_id) const;
  // The newest complete snapshot of job `job_id` of `tenant`; NotFound.
  absl::StatusOr<rpc::InstanceSnapshot> NewestComplete(const std::string& tenant,
                                                       const std::string& job_id) const;

  // A new snapshot of job `job_id` with `ranks` ranks (1..kMaxSnapshotRanks)
  // and the mounts in `volumes` (their `snapshot` empty), then retention:
  // the records dropped to keep `keep` (>= 1) of the tenant's are appended
  // to `*evicted`. InvalidArgument for a bad rank count.
  absl::StatusOr<rpc::InstanceSnapshot> Begin(const std::string& tenant, const std::string& job_id, int32_t ranks,
                                              std::vector<rpc::VolumeSnapshotRef> volumes,
                                              const rpc::JobSpec& spec, const std::string& reason,
                                              int64_t now_unix, int32_t keep,
                                              std::vector<rpc::InstanceSnapshot>* evicted);
  // Rank `rank`'s work folder (`size_bytes`) is stored at WorkdirKey. NotFound;
  // InvalidArgument for a rank out of range; FailedPrecondition when it was
  // stored already.
  absl::StatusOr<rpc::InstanceSnapshot> WorkdirStored(const std::string& id, int32_t rank, int64_t size_bytes);
  // The read-write mount of `volume` is kept as the volume's snapshot
  // `volume_snapshot`. NotFound when the snapshot has no such mount.
  absl::StatusOr<rpc::InstanceSnapshot> VolumeSnapshotted(const std::string& id, const std::string& volume,
                                                          const std::string& volume_snapshot);
  // Forgets it; NotFound.
  absl::StatusOr<rpc::InstanceSnapshot> Remove(const std::string& id);

  // Every work folder stored and every read-write mount snapshotted.
  static bool Complete(const rpc::InstanceSnapshot& s);

 private:
  rpc::InstanceSnapshot* Mutable(const std::string& id);
  void Settle(rpc::InstanceSnapshot* s);  // `complete` from the entries

  std::map<std::string, rpc::InstanceSnapshot> snapshots_;  // by id
  std::map<std::string, int64_t> last_number_;  // by job: the newest n handed out
};

}  // namespace athanor::coord
