#include "coordinator/volumes/volume_mounts.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace athanor::coord {

std::vector<std::string> UsersOf(const std::vector<VolumeUse>& uses, const std::string& tenant,
                                 const std::string& name, bool read_write_only) {
  std::vector<std::string> out;
  for (const VolumeUse& use : uses) {
    if (use.tenant != tenant) continue;
    for (const VolumeMount& m : use.mounts) {
      if (m.name == name && !(read_write_only && m.read_only)) {
        out.push_back(use.job_id);
        break;
      }
    }
  }
  return out;
}

absl::Status CheckMounts(const VolumeRegistry& registry, const JobSpec& spec,
                         const std::vector<VolumeUse>& uses) {
  for (const VolumeMount& m : spec.volumes) {
    if (registry.Find(spec.tenant, m.name) == nullptr) {
      return absl::NotFoundError(absl::StrCat("spec.volumes: tenant ", spec.tenant, " has no volume '", m.name, "'"));
    }
    if (m.read_only) continue;
    if (spec.nodes != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.volumes: volume '", m.name, "' is mounted read-write by a job of ", spec.nodes,
          " nodes; read-write volumes are single-node (ReadWriteOnce): use --nodes 1 or mount it :ro"));
    }
    std::vector<std::string> writers = UsersOf(uses, spec.tenant, m.name, /*read_write_only=*/true);
    if (!writers.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spec.volumes: volume '", m.name, "' is mounted read-write by job ", absl::StrJoin(writers, ", job "),
          " (queued or running); a volume has one writer at a time"));
    }
  }
  return absl::OkStatus();
}

}  // namespace athanor::coord
