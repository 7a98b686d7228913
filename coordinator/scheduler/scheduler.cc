#include "coordinator/scheduler/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/scheduler/placement.h"
#include "coordinator/scheduler/schedule_pass.h"

namespace athanor::sched {

Scheduler::Scheduler(const Clock* clock, SchedulerOptions options)
    : clock_(clock), options_(options) {}

absl::Status Scheduler::AddNode(const NodeSpec& spec) {
  return s_.membership.AddNode(spec, clock_->Now());
}

absl::StatusOr<std::vector<JobId>> Scheduler::SetNodeState(const std::string& name,
                                                           MemberState state) {
  auto holders = s_.membership.SetState(name, state);
  // LAS: a job that loses its node recalls GPUs once requeued, as one
  // preempted for order does (las.h).
  if (holders.ok() && state == MemberState::kDown) {
    for (const JobId& id : *holders) {
      if (auto it = s_.jobs.find(id); it != s_.jobs.end()) it->second.las_recalls = true;
    }
  }
  return holders;
}

absl::Status Scheduler::Heartbeat(const std::string& name) {
  return s_.membership.Heartbeat(name, clock_->Now());
}

void Scheduler::SetTenant(const std::string& tenant, int quota_gpus, double share) {
  if (quota_gpus < 0) {
    s_.quotas.erase(tenant);
  } else {
    s_.quotas[tenant] = quota_gpus;
  }
  s_.shares[tenant] = share > 0 ? share : 1.0;
}

std::vector<Decision> Scheduler::Schedule() {
  return SchedulePass(&s_, options_, clock_->Now()).Run();
}

namespace {

absl::Status ValidateShape(const JobRequest& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("job needs an id");
  if (job.nodes < 1 || job.gpus_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " asks for ", job.nodes,
                                                   " node(s) x ", job.gpus_per_node,
                                                   " GPU(s); both must be at least 1"));
  }
  if (job.min_nodes < 0 || job.min_nodes > job.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " asks for at least ", job.min_nodes, " of ",
                                                   job.nodes, " node(s); the least must be 1..", job.nodes));
  }
  if (job.cpus_per_node < 0 || job.memory_mb_per_node < 0 || job.min_gpu_memory_mb < 0 ||
      job.time_limit < Duration::zero() || job.grace < Duration::zero()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " has a negative requirement"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Scheduler::Submit(JobRequest job, const QueueMarks& marks) {
  RETURN_IF_ERROR(ValidateShape(job));
  if (s_.jobs.count(job.id)) return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " exists"));
  int quota = s_.TenantQuota(job.tenant);
  if (quota >= 0 && job.least_nodes() * job.gpus_per_node > quota) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " needs ", job.least_nodes() * job.gpus_per_node,
                                                   " GPUs but tenant ", job.tenant,
                                                   " has a quota of ", quota));
  }
  if (hosts_cache_version_ != s_.membership.inventory_version()) {
    hosts_cache_.clear();
    hosts_cache_version_ = s_.membership.inventory_version();
  }
  auto [cached, fresh] = hosts_cache_.emplace(ShapeOf(job), 0);
  if (fresh) {
    for (int i = 0; i < s_.membership.size(); ++i) {
      const MemberNode& node = s_.membership.node(i);
      if (!node.removed && StaticallyFits(node.spec, job)) ++cached->second;
    }
  }
  const int hosts = cached->second;
  if (hosts < job.least_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " can never fit: it ",
                                                   DescribeNeed(job), "; only ", hosts,
                                                   " node(s) in the inventory qualify"));
  }
  if (job.grace == Duration::zero()) job.grace = options_.default_grace;
  if (job.submit_seq == 0) job.submit_seq = next_seq_;
  next_seq_ = std::max(next_seq_, job.submit_seq + 1);
  QueuedJob& record = s_.jobs[job.id];
  record.req = std::move(job);
  const TimePoint now = clock_->Now();
  record.queued_at = marks.queued_at ? std::min(*marks.queued_at, now) : now;
  record.order_preemptions = marks.order_preemptions;
  record.las_behind_seq = marks.las_behind_seq;
  record.las_recalls = marks.las_recalls;
  s_.queue.Add(record.req, record.queued_at);
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(const JobId& id) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (it->second.state != QueuedJobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", QueuedJobStateName(it->second.state), "; end it and report its exit"));
  }
  s_.queue.Remove(it->second.req, it->second.queued_at);
  s_.jobs.erase(it);
  return absl::OkStatus();
}

absl::Status Scheduler::OnJobExited(const JobId& id, bool requeue) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  QueuedJob& job = it->second;
  if (job.state == QueuedJobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not running"));
  }
  const TimePoint now = clock_->Now();
  for (int node : job.nodes) s_.membership.Release(node, id);
  s_.accounting.Stop(id, now);
  // LAS: every requeue (a preemption, a failure, a resize) forgives the
  // service so far, so the job returns at its own place in queue 0 (las.h).
  if (requeue && options_.policy == SchedulingPolicy::kLas) {
    job.las_forgiven_gpu_s = s_.accounting.JobGpuSeconds(id, now);
  }
  s_.holders.erase(id);
  s_.IndexEnd(job, false);
  if (!requeue) {
    s_.jobs.erase(it);
    return absl::OkStatus();
  }
  job.state = QueuedJobState::kPending;
  job.nodes.clear();
  job.borrowed_from.clear();
  job.reason = PendingReason{};
  job.queued_at = now;
  s_.queue.Add(job.req, job.queued_at);
  return absl::OkStatus();
}

absl::Status Scheduler::MarkPreempting(const JobId& id, TimePoint deadline) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  QueuedJob& job = it->second;
  if (job.state == QueuedJobState::kPending) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not running"));
  }
  if (job.state == QueuedJobState::kPreempting) return absl::OkStatus();
  job.state = QueuedJobState::kPreempting;
  job.preempt_deadline = deadline;
  s_.IndexEnd(job);
  return absl::OkStatus();
}

void Scheduler::SetTenantHold(const std::string& tenant, std::string why) {
  if (why.empty()) {
    s_.tenant_holds.erase(tenant);
  } else {
    s_.tenant_holds[tenant] = std::move(why);
  }
}

absl::Status Scheduler::SetHold(const JobId& id, std::string why) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  it->second.hold = std::move(why);
  return absl::OkStatus();
}

absl::Status Scheduler::SetAvoidNodes(const JobId& id, std::vector<std::string> nodes) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (it->second.state == QueuedJobState::kPending) {
    // Its queue entry is keyed by shape, which the avoided nodes are part of.
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is pending"));
  }
  it->second.req.avoid_nodes = std::move(nodes);
  return absl::OkStatus();
}

absl::Status Scheduler::OnCheckpoint(const JobId& id, TimePoint committed_at) {
  auto it = s_.jobs.find(id);
  if (it == s_.jobs.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  QueuedJob& job = it->second;
  if (!job.last_checkpoint || *job.last_checkpoint < committed_at) {
    job.last_checkpoint = committed_at;
  }
  return absl::OkStatus();
}

int Scheduler::GrowableNodes(const JobId& id) const {
  const QueuedJob* job = s_.Find(id);
  if (job == nullptr || job->state != QueuedJobState::kRunning || !job->req.elastic()) return 0;
  const JobRequest& req = job->req;
  int room = req.nodes - static_cast<int>(job->nodes.size());
  if (room <= 0) return 0;
  if (s_.queue.size() > 0) {
    for (const auto& [other, q] : s_.jobs) {
      if (q.state == QueuedJobState::kPending && s_.HoldOf(q).empty()) return 0;
    }
  }
  if (const int quota = s_.TenantQuota(req.tenant); quota >= 0) {
    room = std::min(room, (quota - s_.accounting.GpusInUse(req.tenant)) / std::max(req.gpus_per_node, 1));
  }
  const Resources need = PerNodeNeed(req);
  int free = 0;
  for (int i = 0; i < s_.membership.size() && free < room; ++i) {
    if (std::find(job->nodes.begin(), job->nodes.end(), i) != job->nodes.end()) continue;
    if (!UpAndStaticallyFits(s_.membership, i, req)) continue;
    if (FreeOf(s_.membership.node(i)).Covers(need)) ++free;
  }
  return std::max(0, std::min(room, free));
}

absl::Status Scheduler::Restore(JobRequest req, const std::vector<NodeAllocation>& placement,
                                TimePoint started_at, std::optional<TimePoint> last_checkpoint,
                                std::optional<TimePoint> preempt_deadline, const QueueMarks& marks) {
  RETURN_IF_ERROR(ValidateShape(req));
  if (s_.jobs.count(req.id)) return absl::AlreadyExistsError(absl::StrCat("job ", req.id, " exists"));
  if (static_cast<int>(placement.size()) > req.nodes || static_cast<int>(placement.size()) < req.least_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", req.id, " needs ",
                                                   req.elastic() ? absl::StrCat(req.min_nodes, " to ") : "",
                                                   req.nodes, " node(s) but the placement has ",
                                                   placement.size()));
  }
  std::vector<int> nodes;
  absl::Status status;
  for (const NodeAllocation& alloc : placement) {
    auto index = s_.membership.Find(alloc.node);
    if (!index) {
      status = absl::NotFoundError(absl::StrCat("job ", req.id, " restored onto unknown node ",
                                                alloc.node));
    } else if (static_cast<int>(alloc.gpu_ids.size()) != req.gpus_per_node) {
      status = absl::InvalidArgumentError(absl::StrCat("job ", req.id, " holds ",
                                                       alloc.gpu_ids.size(), " GPUs on ",
                                                       alloc.node, ", not ", req.gpus_per_node));
    } else {
      status = s_.membership.AllocateExact(*index, req.id, alloc.gpu_ids, req.cpus_per_node,
                                         req.memory_mb_per_node);
    }
    if (!status.ok()) break;
    nodes.push_back(*index);
  }
  if (!status.ok()) {
    for (int node : nodes) s_.membership.Release(node, req.id);
    return status;
  }
  if (req.grace == Duration::zero()) req.grace = options_.default_grace;
  if (req.submit_seq == 0) req.submit_seq = next_seq_;
  next_seq_ = std::max(next_seq_, req.submit_seq + 1);
  QueuedJob& job = s_.jobs[req.id];
  job.req = std::move(req);
  job.state = preempt_deadline ? QueuedJobState::kPreempting : QueuedJobState::kRunning;
  if (preempt_deadline) job.preempt_deadline = *preempt_deadline;
  job.nodes = std::move(nodes);
  job.started = started_at;
  job.last_checkpoint = last_checkpoint;
  job.order_preemptions = marks.order_preemptions;
  s_.holders[job.req.id] = &job;
  s_.IndexEnd(job);
  s_.accounting.Start(job.req.id, job.req.tenant, job.held_gpus(), started_at);
  return absl::OkStatus();
}

}  // namespace athanor::sched
