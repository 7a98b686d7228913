// Scheduler state changes outside a pass: nodes, tenants, submit, exits,
// restore. The pass itself is in schedule_pass.cc, explanations in why.cc.
#include "coordinator/scheduler/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::sched {

Scheduler::Scheduler(const Clock* clock, SchedulerOptions options)
    : clock_(clock), options_(options) {}

absl::Status Scheduler::AddNode(const NodeSpec& spec) {
  return membership_.AddNode(spec, clock_->Now());
}

absl::Status Scheduler::RemoveNode(const std::string& name) {
  return membership_.RemoveNode(name);
}

absl::StatusOr<std::vector<JobId>> Scheduler::SetNodeState(const std::string& name,
                                                           NodeState state) {
  return membership_.SetState(name, state);
}

absl::Status Scheduler::Heartbeat(const std::string& name) {
  return membership_.Heartbeat(name, clock_->Now());
}

void Scheduler::SetQuota(const std::string& tenant, int gpus) {
  if (gpus < 0) {
    quotas_.erase(tenant);
  } else {
    quotas_[tenant] = gpus;
  }
}

void Scheduler::SetShare(const std::string& tenant, double weight) {
  shares_[tenant] = weight > 0 ? weight : 1.0;
}

int Scheduler::TenantQuota(const std::string& tenant) const {
  auto it = quotas_.find(tenant);
  return it == quotas_.end() ? -1 : it->second;
}

double Scheduler::TenantShare(const std::string& tenant) const {
  auto it = shares_.find(tenant);
  return it == shares_.end() ? 1.0 : it->second;
}

const JobRecord* Scheduler::job(const JobId& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

namespace {

absl::Status ValidateShape(const JobRequest& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("job needs an id");
  if (job.nodes < 1 || job.gpus_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " asks for ", job.nodes,
                                                   " node(s) x ", job.gpus_per_node,
                                                   " GPU(s); both must be at least 1"));
  }
  if (job.cpus_per_node < 0 || job.memory_mb_per_node < 0 || job.min_gpu_memory_mb < 0 ||
      job.time_limit < Duration::zero() || job.grace < Duration::zero()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " has a negative requirement"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Scheduler::Submit(JobRequest job) {
  RETURN_IF_ERROR(ValidateShape(job));
  if (jobs_.count(job.id)) return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " exists"));
  int quota = TenantQuota(job.tenant);
  if (quota >= 0 && job.total_gpus() > quota) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " needs ", job.total_gpus(),
                                                   " GPUs but tenant ", job.tenant,
                                                   " has a quota of ", quota));
  }
  if (hosts_cache_version_ != membership_.inventory_version()) {
    hosts_cache_.clear();
    hosts_cache_version_ = membership_.inventory_version();
  }
  auto [cached, fresh] = hosts_cache_.emplace(ShapeOf(job), 0);
  if (fresh) {
    for (int i = 0; i < membership_.size(); ++i) {
      const NodeRecord& node = membership_.node(i);
      if (!node.removed && StaticallyFits(node.spec, job)) ++cached->second;
    }
  }
  const int hosts = cached->second;
  if (hosts < job.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " can never fit: it ",
                                                   DescribeNeed(job), "; only ", hosts,
                                                   " node(s) in the inventory qualify"));
  }
  if (job.grace == Duration::zero()) job.grace = options_.default_grace;
  if (job.submit_seq == 0) job.submit_seq = next_seq_;
  next_seq_ = std::max(next_seq_, job.submit_seq + 1);
  JobRecord& record = jobs_[job.id];
  record.req = std::move(job);
  queue_.Add(record.req);
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(const JobId& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (it->second.state != JobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", JobStateName(it->second.state), "; end it and report its exit"));
  }
  queue_.Remove(it->second.req);
  jobs_.erase(it);
  return absl::OkStatus();
}

absl::Status Scheduler::OnJobExited(const JobId& id, bool requeue) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  JobRecord& job = it->second;
  if (job.state == JobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not running"));
  }
  const TimePoint now = clock_->Now();
  for (int node : job.nodes) membership_.Release(node, id);
  accounting_.Stop(id, now);
  holders_.erase(id);
  IndexEnd(job, false);
  if (!requeue) {
    jobs_.erase(it);
    return absl::OkStatus();
  }
  job.state = JobState::kPending;
  job.nodes.clear();
  job.borrower = false;
  job.reason = PendingReason{};
  queue_.Add(job.req);
  return absl::OkStatus();
}

absl::Status Scheduler::MarkPreempting(const JobId& id, TimePoint deadline) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  JobRecord& job = it->second;
  if (job.state == JobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not running"));
  }
  if (job.state == JobState::kPreempting) return absl::OkStatus();
  job.state = JobState::kPreempting;
  job.preempt_deadline = deadline;
  IndexEnd(job);
  return absl::OkStatus();
}

absl::Status Scheduler::SetHold(const JobId& id, std::string why) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  it->second.hold = std::move(why);
  return absl::OkStatus();
}

absl::Status Scheduler::SetAvoidNodes(const JobId& id, std::vector<std::string> nodes) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (it->second.state == JobState::kPending) {
    // Its queue entry is keyed by shape, which the avoided nodes are part of.
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is pending"));
  }
  it->second.req.avoid_nodes = std::move(nodes);
  return absl::OkStatus();
}

absl::Status Scheduler::OnCheckpoint(const JobId& id, TimePoint committed_at) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  JobRecord& job = it->second;
  if (!job.last_checkpoint || *job.last_checkpoint < committed_at) {
    job.last_checkpoint = committed_at;
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Restore(JobRequest req, const std::vector<NodeAllocation>& placement,
                                TimePoint started_at, std::optional<TimePoint> last_checkpoint,
                                std::optional<TimePoint> preempt_deadline) {
  RETURN_IF_ERROR(ValidateShape(req));
  if (jobs_.count(req.id)) return absl::AlreadyExistsError(absl::StrCat("job ", req.id, " exists"));
  if (static_cast<int>(placement.size()) != req.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("job ", req.id, " needs ", req.nodes,
                                                   " node(s) but the placement has ",
                                                   placement.size()));
  }
  std::vector<int> nodes;
  absl::Status status;
  for (const NodeAllocation& alloc : placement) {
    auto index = membership_.Find(alloc.node);
    if (!index) {
      status = absl::NotFoundError(absl::StrCat("job ", req.id, " restored onto unknown node ",
                                                alloc.node));
    } else if (static_cast<int>(alloc.gpu_ids.size()) != req.gpus_per_node) {
      status = absl::InvalidArgumentError(absl::StrCat("job ", req.id, " holds ",
                                                       alloc.gpu_ids.size(), " GPUs on ",
                                                       alloc.node, ", not ", req.gpus_per_node));
    } else {
      status = membership_.AllocateExact(*index, req.id, alloc.gpu_ids, req.cpus_per_node,
                                         req.memory_mb_per_node);
    }
    if (!status.ok()) break;
    nodes.push_back(*index);
  }
  if (!status.ok()) {
    for (int node : nodes) membership_.Release(node, req.id);
    return status;
  }
  if (req.grace == Duration::zero()) req.grace = options_.default_grace;
  if (req.submit_seq == 0) req.submit_seq = next_seq_;
  next_seq_ = std::max(next_seq_, req.submit_seq + 1);
  JobRecord& job = jobs_[req.id];
  job.req = std::move(req);
  job.state = preempt_deadline ? JobState::kPreempting : JobState::kRunning;
  if (preempt_deadline) job.preempt_deadline = *preempt_deadline;
  job.nodes = std::move(nodes);
  job.started = started_at;
  job.last_checkpoint = last_checkpoint;
  holders_[job.req.id] = &job;
  IndexEnd(job);
  accounting_.Start(job.req.id, job.req.tenant, job.req.total_gpus(), started_at);
  return absl::OkStatus();
}

void Scheduler::IndexEnd(JobRecord& job, bool hold) {
  if (job.indexed_end) ends_.erase({*job.indexed_end, &job});
  job.indexed_end = hold ? job.EndEstimate() : std::nullopt;
  if (job.indexed_end) ends_.emplace(*job.indexed_end, &job);
}

}  // namespace athanor::sched
