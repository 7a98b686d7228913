#include "coordinator/snapshots/snapshot_registry.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "common/status.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

absl::Status NoSnapshot(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no snapshot '", id, "'"));
}

// n of "snap-<job>-<n>", or 0.
int64_t NumberOf(const rpc::InstanceSnapshot& s) {
  const std::string prefix = absl::StrCat("snap-", s.job_id(), "-");
  int64_t n = 0;
  if (!absl::StartsWith(s.id(), prefix) || !absl::SimpleAtoi(s.id().substr(prefix.size()), &n)) return 0;
  return n;
}

bool Older(const rpc::InstanceSnapshot& a, const rpc::InstanceSnapshot& b) {
  return std::make_tuple(a.created_unix(), NumberOf(a), a.id()) < std::make_tuple(b.created_unix(), NumberOf(b), b.id());
}

}  // namespace

std::string SnapshotWorkdirKey(const std::string& tenant, const std::string& id, int32_t rank) {
  return absl::StrCat("snapshots/", tenant, "/", id, "/rank-", rank, ".tar");
}

absl::Status SnapshotRegistry::Restore(std::vector<rpc::InstanceSnapshot> rows) {
  for (rpc::InstanceSnapshot& s : rows) {
    const std::string row = absl::StrCat("snapshot row ", s.id(), ": ");
    for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"id", &s.id()},
                                       {"tenant", &s.tenant()}, {"job_id", &s.job_id()}}) {
      if (absl::Status v = ValidateName(field, *value); !v.ok()) {
        return absl::InvalidArgumentError(row + std::string(v.message()));
      }
    }
    if (s.workdir_keys_size() < 1 || s.workdir_keys_size() > kMaxSnapshotRanks) {
      return absl::InvalidArgumentError(absl::StrCat(row, s.workdir_keys_size(), " ranks"));
    }
    int64_t& last = last_number_[s.job_id()];
    last = std::max(last, NumberOf(s));
    const std::string id = s.id();
    if (!snapshots_.emplace(id, std::move(s)).second) return absl::InvalidArgumentError(row + "a duplicate");
  }
  return absl::OkStatus();
}

const rpc::InstanceSnapshot* SnapshotRegistry::Find(const std::string& id) const {
  auto it = snapshots_.find(id);
  return it == snapshots_.end() ? nullptr : &it->second;
}

rpc::InstanceSnapshot* SnapshotRegistry::Mutable(const std::string& id) {
  auto it = snapshots_.find(id);
  return it == snapshots_.end() ? nullptr : &it->second;
}

std::vector<rpc::InstanceSnapshot> SnapshotRegistry::List(const std::string& tenant) const {
  std::vector<rpc::InstanceSnapshot> out;
  for (const auto& [id, s] : snapshots_) {
    if (tenant.empty() || s.tenant() == tenant) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), Older);
  return out;
}

const rpc::InstanceSnapshot* SnapshotRegistry::Pending(const std::string& job_id) const {
  const rpc::InstanceSnapshot* out = nullptr;
  for (const auto& [id, s] : snapshots_) {
    if (s.job_id() == job_id && !s.complete() && (out == nullptr || Older(*out, s))) out = &s;
  }
  return out;
}

absl::StatusOr<rpc::InstanceSnapshot> SnapshotRegistry::NewestComplete(const std::string& tenant,
                                                                       const std::string& job_id) const {
  const rpc::InstanceSnapshot* out = nullptr;
  for (const auto& [id, s] : snapshots_) {
    if (s.tenant() == tenant && s.job_id() == job_id && s.complete() && (out == nullptr || Older(*out, s))) out = &s;
  }
  if (out == nullptr) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " of tenant ", tenant, " has no complete snapshot"));
  }
  return *out;
}

absl::StatusOr<rpc::InstanceSnapshot> SnapshotRegistry::Begin(const std::string& tenant, const std::string& job_id,
                                                              int32_t ranks,
                                                              std::vector<rpc::VolumeSnapshotRef> volumes,
                                                              const rpc::JobSpec& spec, const std::string& reason,
                                                              int64_t now_unix, int32_t keep,
                                                              std::vector<rpc::InstanceSnapshot>* evicted) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  RETURN_IF_ERROR(ValidateName("job_id", job_id));
  if (ranks < 1 || ranks > kMaxSnapshotRanks) {
    return absl::InvalidArgumentError(absl::StrCat("ranks: ", ranks, " is not in 1..", kMaxSnapshotRanks));
  }
  int64_t& last = last_number_[job_id];
  rpc::InstanceSnapshot s;
  s.set_id(absl::StrCat("snap-", job_id, "-", ++last));
  s.set_tenant(tenant);
  s.set_job_id(job_id);
  s.set_created_unix(now_unix);
  s.set_reason(reason);
  for (int32_t r = 0; r < ranks; ++r) s.add_workdir_keys("");
  for (rpc::VolumeSnapshotRef& v : volumes) {
    v.clear_snapshot();
    *s.add_volumes() = std::move(v);
  }
  *s.mutable_spec() = spec;
  Settle(&s);
  snapshots_[s.id()] = s;
  std::vector<rpc::InstanceSnapshot> mine = List(tenant);
  for (size_t i = 0; i + std::max(keep, 1) < mine.size(); ++i) {
    snapshots_.erase(mine[i].id());
    if (evicted != nullptr) evicted->push_back(std::move(mine[i]));
  }
  return s;
}

absl::StatusOr<rpc::InstanceSnapshot> SnapshotRegistry::WorkdirStored(const std::string& id, int32_t rank,
                                                                      int64_t size_bytes) {
  rpc::InstanceSnapshot* s = Mutable(id);
  if (s == nullptr) return NoSnapshot(id);
  if (rank < 0 || rank >= s->workdir_keys_size()) {
    return absl::InvalidArgumentError(absl::StrCat("snapshot ", id, " has no rank ", rank));
  }
  if (!s->workdir_keys(rank).empty()) {
    return absl::FailedPreconditionError(absl::StrCat("snapshot ", id, ": rank ", rank, "'s work folder is stored"));
  }
  if (size_bytes < 0) return absl::InvalidArgumentError("size_bytes: below 0");
  s->set_workdir_keys(rank, SnapshotWorkdirKey(s->tenant(), id, rank));
  s->set_size_bytes(s->size_bytes() + size_bytes);
  Settle(s);
  return *s;
}

absl::StatusOr<rpc::InstanceSnapshot> SnapshotRegistry::VolumeSnapshotted(const std::string& id,
                                                                          const std::string& volume,
                                                                          const std::string& volume_snapshot) {
  rpc::InstanceSnapshot* s = Mutable(id);
  if (s == nullptr) return NoSnapshot(id);
  for (rpc::VolumeSnapshotRef& v : *s->mutable_volumes()) {
    if (v.volume() != volume) continue;
    v.set_snapshot(volume_snapshot);
    Settle(s);
    return *s;
  }
  return absl::NotFoundError(absl::StrCat("snapshot ", id, " has no mount of volume '", volume, "'"));
}

absl::StatusOr<rpc::InstanceSnapshot> SnapshotRegistry::Remove(const std::string& id) {
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return NoSnapshot(id);
  rpc::InstanceSnapshot s = std::move(it->second);
  snapshots_.erase(it);
  return s;
}

bool SnapshotRegistry::Complete(const rpc::InstanceSnapshot& s) {
  for (const std::string& k : s.workdir_keys()) {
    if (k.empty()) return false;
  }
  for (const rpc::VolumeSnapshotRef& v : s.volumes()) {
    if (!v.read_only() && v.snapshot().empty()) return false;
  }
  return !s.workdir_keys().empty();
}

void SnapshotRegistry::Settle(rpc::InstanceSnapshot* s) { s->set_complete(Complete(*s)); }

}  // namespace athanor::coord
