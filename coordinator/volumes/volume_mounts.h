// Which jobs mount which volumes, and the rules a submission's mounts must
// keep (docs/security.md, "Volumes"):
//   - every mounted volume exists and is the submitting tenant's; another
//     tenant's is NotFound, the same answer as a missing one, so that names
//     do not leak across tenants;
//   - a read-write mount needs a job of one node (ReadWriteOnce: one copy,
//     synced up as a whole when the job's box ends);
//   - a volume that a queued or running job mounts read-write cannot be
//     mounted read-write by another (FailedPrecondition naming that job);
//     read-only mounts may be shared.
// Pure; thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/types.h"
#include "coordinator/volumes/volume_registry.h"

namespace athanor::coord {

// A queued or running job's mounts.
struct VolumeUse {
  std::string job_id;
  std::string tenant;
  std::vector<VolumeMount> mounts;
};

// The ids of the jobs of `uses` that mount `tenant`'s volume `name` (only
// read-write mounts when `read_write_only`), in the order of `uses`.
std::vector<std::string> UsersOf(const std::vector<VolumeUse>& uses, const std::string& tenant,
                                 const std::string& name, bool read_write_only = false);

// Whether `spec` (its tenant filled in) may mount its volumes now, with
// `uses` the queued and running jobs.
absl::Status CheckMounts(const VolumeRegistry& registry, const JobSpec& spec,
                         const std::vector<VolumeUse>& uses);

}  // namespace athanor::coord
