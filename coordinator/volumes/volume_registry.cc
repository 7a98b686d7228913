#include "coordinator/volumes/volume_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

absl::Status CheckTenant(const std::string& tenant) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  // The tenant is a folder of the data store's keys.
  if (tenant == "." || tenant == "..") {
    return absl::InvalidArgumentError(absl::StrCat("tenant: '", tenant, "' is not a name"));
  }
  return absl::OkStatus();
}

absl::Status NoVolume(const std::string& tenant, const std::string& name) {
  return absl::NotFoundError(absl::StrCat("tenant ", tenant, " has no volume '", name, "'"));
}

}  // namespace

std::string VolumeBlobKey(const std::string& tenant, const std::string& name, int64_t generation) {
  return absl::StrCat("volumes/", tenant, "/", name, "/", generation, ".tar");
}

absl::Status VolumeRegistry::Restore(std::vector<rpc::Volume> volumes) {
  for (rpc::Volume& v : volumes) {
    const std::string row = absl::StrCat("volume row ", v.tenant(), "/", v.name(), ": ");
    if (absl::Status s = CheckTenant(v.tenant()); !s.ok()) return absl::InvalidArgumentError(row + std::string(s.message()));
    if (absl::Status s = ValidateResourceName("name", v.name()); !s.ok()) {
      return absl::InvalidArgumentError(row + std::string(s.message()));
    }
    Key key{v.tenant(), v.name()};
    v.clear_used_by();  // a view, never kept
    if (!volumes_.emplace(key, std::move(v)).second) return absl::InvalidArgumentError(row + "a duplicate");
  }
  return absl::OkStatus();
}

const rpc::Volume* VolumeRegistry::Find(const std::string& tenant, const std::string& name) const {
  auto it = volumes_.find({tenant, name});
  return it == volumes_.end() ? nullptr : &it->second;
}

rpc::Volume* VolumeRegistry::Mutable(const std::string& tenant, const std::string& name) {
  auto it = volumes_.find({tenant, name});
  return it == volumes_.end() ? nullptr : &it->second;
}

std::vector<rpc::Volume> VolumeRegistry::List(const std::string& tenant) const {
  std::vector<rpc::Volume> out;
  auto it = tenant.empty() ? volumes_.begin() : volumes_.lower_bound({tenant, ""});
  for (; it != volumes_.end() && (tenant.empty() || it->first.first == tenant); ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<rpc::Volume> VolumeRegistry::Create(const std::string& tenant, const std::string& name,
                                                   int64_t size_limit_bytes, const VolumeQuota& quota,
                                                   int64_t now_unix) {
  RETURN_IF_ERROR(CheckTenant(tenant));
  RETURN_IF_ERROR(ValidateResourceName("name", name));
  if (size_limit_bytes <= 0 || size_limit_bytes > kMaxVolumeBytes) {
    return absl::InvalidArgumentError(absl::StrCat("size_limit_bytes: ", size_limit_bytes,
                                                   " is not in 1..", kMaxVolumeBytes, " (1 PiB)"));
  }
  if (Find(tenant, name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("tenant ", tenant, " already has a volume '", name, "'"));
  }
  int64_t count = 0;
  int64_t bytes = 0;
  for (auto it = volumes_.lower_bound({tenant, ""}); it != volumes_.end() && it->first.first == tenant; ++it) {
    ++count;
    bytes += it->second.size_limit_bytes();
  }
  if (count + 1 > quota.max_count) {
    return absl::ResourceExhaustedError(absl::StrCat("tenant ", tenant, " holds ", count,
                                                     " volumes; its quota is ", quota.max_count));
  }
  if (bytes + size_limit_bytes > quota.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "volume '", name, "' (", size_limit_bytes, " bytes) would bring tenant ", tenant, "'s volumes to ",
        bytes + size_limit_bytes, " bytes; its quota is ", quota.max_bytes, " bytes"));
  }
  rpc::Volume v;
  v.set_name(name);
  v.set_tenant(tenant);
  v.set_size_limit_bytes(size_limit_bytes);
  v.set_created_unix(now_unix);
  volumes_[{tenant, name}] = v;
  return v;
}

absl::StatusOr<rpc::Volume> VolumeRegistry::Remove(const std::string& tenant, const std::string& name) {
  auto it = volumes_.find({tenant, name});
  if (it == volumes_.end()) return NoVolume(tenant, name);
  rpc::Volume v = std::move(it->second);
  volumes_.erase(it);
  return v;
}

absl::StatusOr<rpc::Volume> VolumeRegistry::Snapshot(const std::string& tenant, const std::string& name,
                                                     const std::string& snapshot, int64_t now_unix) {
  RETURN_IF_ERROR(ValidateResourceName("snapshot", snapshot));
  rpc::Volume* v = Mutable(tenant, name);
  if (v == nullptr) return NoVolume(tenant, name);
  for (const rpc::VolumeSnapshot& s : v->snapshots()) {
    if (s.name() == snapshot) {
      return absl::AlreadyExistsError(absl::StrCat("volume '", name, "' already has a snapshot '", snapshot, "'"));
    }
  }
  if (v->snapshots_size() >= kMaxSnapshotsPerVolume) {
    return absl::ResourceExhaustedError(absl::StrCat("volume '", name, "' has ", v->snapshots_size(),
                                                     " snapshots; at most ", kMaxSnapshotsPerVolume));
  }
  rpc::VolumeSnapshot* s = v->add_snapshots();
  s->set_name(snapshot);
  s->set_generation(v->generation());
  s->set_digest(v->digest());
  s->set_size_bytes(v->used_bytes());
  s->set_created_unix(now_unix);
  return *v;
}

absl::StatusOr<rpc::Volume> VolumeRegistry::DropSnapshot(const std::string& tenant, const std::string& name,
                                                         const std::string& snapshot) {
  rpc::Volume* v = Mutable(tenant, name);
  if (v == nullptr) return NoVolume(tenant, name);
  auto* snaps = v->mutable_snapshots();
  for (int i = 0; i < snaps->size(); ++i) {
    if (snaps->Get(i).name() != snapshot) continue;
    snaps->DeleteSubrange(i, 1);
    return *v;
  }
  return absl::NotFoundError(absl::StrCat("volume '", name, "' has no snapshot '", snapshot, "'"));
}

absl::StatusOr<int64_t> VolumeRegistry::ReserveGeneration(const std::string& tenant, const std::string& name,
                                                          int64_t base_generation) {
  const rpc::Volume* v = Find(tenant, name);
  if (v == nullptr) return NoVolume(tenant, name);
  if (base_generation != v->generation()) {
    return absl::AbortedError(absl::StrCat("volume '", name, "' is at generation ", v->generation(),
                                           ", not ", base_generation, ": another job stored it since"));
  }
  int64_t& last = reserved_[{tenant, name}];
  last = std::max(last, v->generation()) + 1;
  return last;
}

absl::StatusOr<rpc::Volume> VolumeRegistry::CommitGeneration(const std::string& tenant, const std::string& name,
                                                             int64_t base_generation, int64_t generation,
                                                             const std::string& digest, int64_t size_bytes,
                                                             int64_t now_unix) {
  rpc::Volume* v = Mutable(tenant, name);
  if (v == nullptr) return NoVolume(tenant, name);
  if (base_generation != v->generation()) {
    return absl::AbortedError(absl::StrCat("volume '", name, "' is at generation ", v->generation(),
                                           ", not ", base_generation, ": another job stored it since"));
  }
  if (generation <= v->generation()) {
    return absl::InvalidArgumentError(absl::StrCat("generation ", generation, " is not past ", v->generation()));
  }
  if (size_bytes < 0 || size_bytes > v->size_limit_bytes()) {
    return absl::ResourceExhaustedError(absl::StrCat("volume '", name, "': ", size_bytes,
                                                     " bytes pass its size limit of ", v->size_limit_bytes(), " bytes"));
  }
  v->set_generation(generation);
  v->set_digest(digest);
  v->set_used_bytes(size_bytes);
  v->set_synced_unix(now_unix);
  return *v;
}

bool VolumeRegistry::Referenced(const rpc::Volume& volume, int64_t generation) {
  if (volume.generation() == generation) return true;
  for (const rpc::VolumeSnapshot& s : volume.snapshots()) {
    if (s.generation() == generation) return true;
  }
  return false;
}

std::vector<int64_t> VolumeRegistry::Blobs(const rpc::Volume& volume) {
  std::vector<int64_t> out;
  if (volume.generation() > 0) out.push_back(volume.generation());
  for (const rpc::VolumeSnapshot& s : volume.snapshots()) {
    if (s.generation() > 0) out.push_back(s.generation());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace athanor::coord
