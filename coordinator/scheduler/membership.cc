#include "coordinator/scheduler/membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::sched {

const char* MemberStateName(MemberState state) {
  switch (state) {
    case MemberState::kUp: return "UP";
    case MemberState::kDraining: return "DRAINING";
    case MemberState::kDrained: return "DRAINED";
    case MemberState::kDown: return "DOWN";
    case MemberState::kUnknown: return "UNKNOWN";
  }
  return "?";
}

const char* QueuedJobStateName(QueuedJobState state) {
  switch (state) {
    case QueuedJobState::kPending: return "PENDING";
    case QueuedJobState::kRunning: return "RUNNING";
    case QueuedJobState::kPreempting: return "PREEMPTING";
  }
  return "?";
}

bool StaticallyFits(const NodeSpec& spec, const JobRequest& job) {
  return spec.gpus >= job.gpus_per_node &&
         (job.gpu_model.empty() || job.gpu_model == spec.gpu_model) &&
         spec.gpu_memory_mb >= job.min_gpu_memory_mb && spec.cpus >= job.cpus_per_node &&
         spec.memory_mb >= job.memory_mb_per_node;
}

absl::Status Membership::AddNode(const NodeSpec& spec, TimePoint now) {
  if (spec.name.empty() || spec.gpus < 0) {
    return absl::InvalidArgumentError("node needs a name and a GPU count >= 0");
  }
  auto it = by_name_.find(spec.name);
  if (it == by_name_.end()) {
    int index = static_cast<int>(nodes_.size());
    MemberNode record;
    record.spec = spec;
    record.last_heartbeat = now;
    record.free_gpus = spec.gpus;
    record.free_cpus = spec.cpus;
    record.free_memory_mb = spec.memory_mb;
    record.gpu_used.assign(spec.gpus, false);
    InternLabels(record);
    ++inventory_version_;
    nodes_.push_back(std::move(record));
    by_name_[spec.name] = index;
    max_gpus_ = std::max(max_gpus_, spec.gpus);
    Index(index);
    return absl::OkStatus();
  }
  int index = it->second;
  MemberNode& record = nodes_[index];
  if (!record.holds.empty() && spec.gpus != record.spec.gpus) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", spec.name, " re-registered with ", spec.gpus, " GPUs but jobs hold GPUs of its ",
        record.spec.gpus));
  }
  Unindex(index);
  int used_cpus = record.spec.cpus - record.free_cpus;
  int64_t used_mem = record.spec.memory_mb - record.free_memory_mb;
  record.spec = spec;
  InternLabels(record);
  ++inventory_version_;
  record.removed = false;
  record.state = MemberState::kUp;
  record.last_heartbeat = now;
  if (record.holds.empty()) record.gpu_used.assign(spec.gpus, false);
  record.free_gpus = static_cast<int>(std::count(record.gpu_used.begin(), record.gpu_used.end(), false));
  record.free_cpus = spec.cpus - used_cpus;
  record.free_memory_mb = spec.memory_mb - used_mem;
  max_gpus_ = std::max(max_gpus_, spec.gpus);
  Index(index);
  return absl::OkStatus();
}

absl::Status Membership::RemoveNode(const std::string& name) {
  auto index = Find(name);
  if (!index) return absl::NotFoundError(absl::StrCat("no node ", name));
  MemberNode& record = nodes_[*index];
  if (!record.holds.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", name, " still holds ", record.holds.size(), " job(s)"));
  }
  Unindex(*index);
  ++inventory_version_;
  record.removed = true;
  by_name_.erase(name);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobId>> Membership::SetState(const std::string& name, MemberState state) {
  auto index = Find(name);
  if (!index) return absl::NotFoundError(absl::StrCat("no node ", name));
  MemberNode& record = nodes_[*index];
  Unindex(*index);
  record.state = state;
  if (state == MemberState::kDraining && record.holds.empty()) record.state = MemberState::kDrained;
  Index(*index);
  std::vector<JobId> jobs;
  for (const auto& [job, hold] : record.holds) jobs.push_back(job);
  return jobs;
}

absl::Status Membership::SetNote(const std::string& name, bool drain, std::string reason) {
  auto index = Find(name);
  if (!index) return absl::NotFoundError(absl::StrCat("no node ", name));
  nodes_[*index].drain = drain;
  nodes_[*index].reason = std::move(reason);
  return absl::OkStatus();
}

absl::Status Membership::SetCachedImages(const std::string& name, std::vector<std::string> digests) {
  auto index = Find(name);
  if (!index) return absl::NotFoundError(absl::StrCat("no node ", name));
  nodes_[*index].cached_images = std::move(digests);
  return absl::OkStatus();
}

absl::Status Membership::Heartbeat(const std::string& name, TimePoint now) {
  auto index = Find(name);
  if (!index) return absl::NotFoundError(absl::StrCat("no node ", name));
  nodes_[*index].last_heartbeat = now;
  return absl::OkStatus();
}

NodeAllocation Membership::Allocate(int index, const JobId& job, int gpus, int cpus,
                                    int64_t memory_mb) {
  MemberNode& record = nodes_[index];
  ATHANOR_CHECK(record.free_gpus >= gpus && record.free_cpus >= cpus &&
                record.free_memory_mb >= memory_mb)
      << "over-allocation of node " << record.spec.name << " for job " << job;
  ATHANOR_CHECK(record.holds.count(job) == 0) << "job " << job << " already on " << record.spec.name;
  Unindex(index);
  NodeHold& hold = record.holds[job];
  for (int id = 0; id < record.spec.gpus && static_cast<int>(hold.gpu_ids.size()) < gpus; ++id) {
    if (!record.gpu_used[id]) {
      record.gpu_used[id] = true;
      hold.gpu_ids.push_back(id);
    }
  }
  hold.cpus = cpus;
  hold.memory_mb = memory_mb;
  record.free_gpus -= gpus;
  record.free_cpus -= cpus;
  record.free_memory_mb -= memory_mb;
  Index(index);
  return NodeAllocation{record.spec.name, hold.gpu_ids};
}

absl::Status Membership::AllocateExact(int index, const JobId& job, const std::vector<int>& gpu_ids,
                                       int cpus, int64_t memory_mb) {
  MemberNode& record = nodes_[index];
  if (record.holds.count(job)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job, " already on ", record.spec.name));
  }
  for (int id : gpu_ids) {
    if (id < 0 || id >= record.spec.gpus || record.gpu_used[id]) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", id, " of node ", record.spec.name, " is not free"));
    }
  }
  if (record.free_cpus < cpus || record.free_memory_mb < memory_mb) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", record.spec.name, " lacks the CPUs/RAM to restore job ", job));
  }
  Unindex(index);
  NodeHold& hold = record.holds[job];
  for (int id : gpu_ids) record.gpu_used[id] = true;
  hold.gpu_ids = gpu_ids;
  std::sort(hold.gpu_ids.begin(), hold.gpu_ids.end());
  hold.cpus = cpus;
  hold.memory_mb = memory_mb;
  record.free_gpus -= static_cast<int>(gpu_ids.size());
  record.free_cpus -= cpus;
  record.free_memory_mb -= memory_mb;
  Index(index);
  return absl::OkStatus();
}

void Membership::Release(int index, const JobId& job) {
  MemberNode& record = nodes_[index];
  auto it = record.holds.find(job);
  if (it == record.holds.end()) return;
  Unindex(index);
  for (int id : it->second.gpu_ids) record.gpu_used[id] = false;
  record.free_gpus += static_cast<int>(it->second.gpu_ids.size());
  record.free_cpus += it->second.cpus;
  record.free_memory_mb += it->second.memory_mb;
  record.holds.erase(it);
  if (record.state == MemberState::kDraining && record.holds.empty()) {
    record.state = MemberState::kDrained;
  }
  Index(index);
}

std::optional<int> Membership::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

const std::set<int>* Membership::Bucket(const std::string& model, int free) const {
  auto it = free_index_.find(model);
  if (it == free_index_.end() || free < 0 || free >= static_cast<int>(it->second.size())) {
    return nullptr;
  }
  return it->second[free].empty() ? nullptr : &it->second[free];
}

std::vector<std::string> Membership::Models() const {
  std::vector<std::string> models;
  for (const auto& [model, buckets] : free_index_) models.push_back(model);
  return models;
}

void Membership::InternLabels(MemberNode& record) {
  auto intern = [](const std::map<std::string, std::string>& labels, const char* key,
                   std::vector<std::string>& names, std::unordered_map<std::string, int>& ids) {
    auto it = labels.find(key);
    if (it == labels.end()) return -1;
    auto [id, fresh] = ids.emplace(it->second, static_cast<int>(names.size()));
    if (fresh) names.push_back(it->second);
    return id->second;
  };
  record.switch_group = intern(record.spec.labels, "switch", switch_names_, switch_ids_);
  record.rack_group = intern(record.spec.labels, "rack", rack_names_, rack_ids_);
}

void Membership::Unindex(int index) {
  const MemberNode& record = nodes_[index];
  auto it = free_index_.find(record.spec.gpu_model);
  if (it == free_index_.end() || record.free_gpus >= static_cast<int>(it->second.size())) return;
  it->second[record.free_gpus].erase(index);
}

void Membership::Index(int index) {
  const MemberNode& record = nodes_[index];
  if (record.removed || record.state != MemberState::kUp) return;
  auto& buckets = free_index_[record.spec.gpu_model];
  if (static_cast<int>(buckets.size()) <= record.free_gpus) buckets.resize(record.free_gpus + 1);
  buckets[record.free_gpus].insert(index);
}

}  // namespace athanor::sched
