// ClusterState's admin operations (preempt, drain, quotas, usage, why),
// checkpoint reports and idle reclaim of interactive allocations.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "coordinator/cluster_state.h"
#include "common/status.h"
#include "coordinator/validation.h"

namespace athanor::coord {
namespace {

std::string Shorten(const std::string& s) { return s.size() <= 64 ? s : s.substr(0, 64) + "..."; }

std::string FormatUnix(double unix) {
  time_t t = static_cast<time_t>(unix);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

absl::StatusOr<JobRecord> ClusterState::PreemptJob(const std::string& id, Duration grace) {
  JobRecord* job = MutableJob(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
  if (!job->allocated || IsTerminal(job->state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job->id, " is ", JobStateName(job->state), "; only running jobs can be preempted"));
  }
  if (job->stopping) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job->id, " is already stopping: ",
                                                      job->stop_reason));
  }
  BeginPreempt(job, grace > Duration::zero() ? grace : JobGrace(*job), "preempted by an admin");
  return *job;
}

absl::StatusOr<NodeView> ClusterState::DrainNode(const std::string& name, Duration grace,
                                                 const std::string& reason) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node '", Shorten(name), "'"));
  NodeRecord& node = it->second;
  node.drain = true;
  node.reason = reason.empty() ? "drained by an admin" : reason;
  if (node.state != NodeState::kDown && node.state != NodeState::kUnknown) {
    node.state = NodeState::kDraining;
    sched_.SetNodeState(name, sched::NodeState::kDraining).IgnoreError();
  }
  MarkNode(name);
  ATHANOR_LOG(INFO) << "node " << name << " draining: " << node.reason;
  for (int64_t seq : std::set<int64_t>(active_)) {
    JobRecord& job = jobs_[seq];
    bool here = std::any_of(job.allocation.begin(), job.allocation.end(),
                            [&](const RankPlacement& p) { return p.node == name; });
    if (!here || job.stopping) continue;
    BeginPreempt(&job, grace > Duration::zero() ? grace : JobGrace(job),
                 absl::StrCat("node ", name, " is draining (", node.reason, ")"));
  }
  UpdateDrained();
  for (NodeView& v : Nodes()) {
    if (v.record.name == name) return v;
  }
  return absl::InternalError("node vanished");
}

absl::StatusOr<NodeView> ClusterState::UndrainNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node '", Shorten(name), "'"));
  NodeRecord& node = it->second;
  node.drain = false;
  if (node.state == NodeState::kDraining || node.state == NodeState::kDrained) {
    node.state = NodeState::kUp;
    node.reason = "";
    sched_.SetNodeState(name, sched::NodeState::kUp).IgnoreError();
  }
  MarkNode(name);
  ATHANOR_LOG(INFO) << "node " << name << " undrained (" << NodeStateName(node.state) << ")";
  Schedule();
  for (NodeView& v : Nodes()) {
    if (v.record.name == name) return v;
  }
  return absl::InternalError("node vanished");
}

void ClusterState::UpdateDrained() {
  for (auto& [name, node] : nodes_) {
    if (node.state != NodeState::kDraining) continue;
    bool busy = false;
    for (int64_t seq : active_) {
      for (const RankPlacement& p : jobs_[seq].allocation) busy = busy || p.node == name;
    }
    if (busy) continue;
    node.state = NodeState::kDrained;
    sched_.SetNodeState(name, sched::NodeState::kDrained).IgnoreError();
    MarkNode(name);
    ATHANOR_LOG(INFO) << "node " << name << " DRAINED";
  }
}

absl::Status ClusterState::SetQuota(const std::string& tenant, int32_t gpus) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  if (gpus < 0) {
    quotas_.erase(tenant);
  } else {
    quotas_[tenant] = gpus;
  }
  sched_.SetQuota(tenant, gpus < 0 ? -1 : gpus);
  dirty_quotas_[tenant] = gpus < 0 ? -1 : gpus;
  ATHANOR_LOG(INFO) << "quota of tenant " << tenant << ": "
                    << (gpus < 0 ? std::string("none") : absl::StrCat(gpus, " GPUs"));
  Schedule();
  return absl::OkStatus();
}

std::vector<QuotaRow> ClusterState::Quotas() const {
  std::vector<QuotaRow> out;
  for (const auto& [tenant, gpus] : quotas_) {
    out.push_back({tenant, gpus, sched_.accounting().GpusInUse(tenant)});
  }
  return out;
}

std::vector<UsageRow> ClusterState::Usage(const std::string& tenant, double since_unix) const {
  const double now = UnixNow();
  std::map<std::string, std::vector<UsageRow>> by_tenant;
  for (const auto& [seq, job] : jobs_) {
    if (!tenant.empty() && job.spec.tenant != tenant) continue;
    if (job.usage.empty()) continue;
    double gs = JobGpuSeconds(job, now, since_unix);
    bool holding = !job.usage.empty() && job.usage.back().end == 0;
    if (gs <= 0 && !holding) continue;
    by_tenant[job.spec.tenant].push_back(
        {job.spec.tenant, job.id, gs, holding ? job.spec.nodes * job.spec.gpus_per_node : 0});
  }
  std::vector<UsageRow> out;
  for (auto& [t, rows] : by_tenant) {
    UsageRow total{t, "", 0, 0};
    for (const UsageRow& r : rows) {
      total.gpu_seconds += r.gpu_seconds;
      total.gpus_in_use += r.gpus_in_use;
    }
    out.push_back(total);
    for (UsageRow& r : rows) out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<WhyResult> ClusterState::Why(const std::string& id) const {
  const JobRecord* job = FindJob(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
  WhyResult out;
  out.state = job->state;
  if (job->state == JobState::kPending) {
    absl::StatusOr<sched::WhyReport> r = sched_.Why(job->id);
    if (r.ok()) {
      out.reasons = r->reasons;
      out.queue_position = r->queue_position;
    }
    if (job->reason.rfind("requeued", 0) == 0) out.reasons.push_back(job->reason);
    return out;
  }
  if (job->stopping) {
    out.reasons.push_back(absl::StrCat("stopping: ", job->stop_reason));
    if (job->preempted) {
      out.reasons.push_back(absl::StrCat("ranks are SIGKILLed at ",
                                         FormatUnix(job->preempt_deadline_unix)));
    }
  } else if (job->allocated) {
    std::vector<std::string> nodes;
    for (const RankPlacement& p : job->allocation) {
      if (nodes.empty() || nodes.back() != p.node) nodes.push_back(p.node);
    }
    std::string where;
    for (const std::string& n : nodes) absl::StrAppend(&where, where.empty() ? "" : ",", n);
    out.reasons.push_back(absl::StrCat(JobStateName(job->state), " on ", where, " (attempt ",
                                       job->attempt, ")"));
    if (!job->reason.empty()) out.reasons.push_back(job->reason);
  } else {
    out.reasons.push_back(job->reason.empty() ? JobStateName(job->state) : job->reason);
  }
  return out;
}

absl::Status ClusterState::ReportCheckpoint(const std::string& id, int64_t step,
                                            int64_t commit_unix) {
  JobRecord* job = MutableJob(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
  if (step < 0) return absl::InvalidArgumentError("step: must be >= 0");
  if (step <= job->committed_step) return absl::OkStatus();
  job->committed_step = step;
  job->last_checkpoint_unix = commit_unix > 0 ? static_cast<double>(commit_unix) : UnixNow();
  MarkJob(*job);
  if (job->allocated) {
    sched_.OnCheckpoint(job->id, FromUnix(job->last_checkpoint_unix)).IgnoreError();
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> ClusterState::CheckpointTargets() const {
  std::map<std::string, std::string> out;
  for (int64_t seq : active_) {
    const JobRecord& job = jobs_.at(seq);
    if (!job.spec.checkpoint_uri.empty()) out[job.id] = job.spec.checkpoint_uri;
  }
  return out;
}

void ClusterState::TrackUse(JobRecord* job, const RankReport& r) {
  if (r.phase != RankPhase::kRunning) return;
  const double now = UnixNow();
  if (r.gpu_utilization >= 0) {  // a real GPU: its utilisation decides
    if (r.gpu_utilization >= 100.0 * options_.idle_cpu_fraction) MarkActive(job, now);
    return;
  }
  if (r.cpu_seconds < 0) return;
  auto key = std::make_pair(job->seq, r.rank);
  auto it = cpu_samples_.find(key);
  if (it == cpu_samples_.end()) {
    cpu_samples_[key] = {r.cpu_seconds, now};
    return;
  }
  auto [cpu0, t0] = it->second;
  if (now - t0 < 0.5) return;  // too short a window to average over
  it->second = {r.cpu_seconds, now};
  if ((r.cpu_seconds - cpu0) / (now - t0) < options_.idle_cpu_fraction) return;
  MarkActive(job, now);
}

void ClusterState::MarkActive(JobRecord* job, double now) {
  job->last_active_unix = now;
  if (job->idle_warned) {
    job->idle_warned = false;
    job->reason = "";
    MarkJob(*job);
    DesiredChanged();
  }
}

void ClusterState::CheckIdle(JobRecord* job) {
  if (!job->spec.interactive || job->spec.idle_timeout_s <= 0 || job->stopping ||
      job->state != JobState::kRunning) {
    return;
  }
  const double now = UnixNow();
  if (job->last_active_unix <= 0) job->last_active_unix = now;
  const double idle = now - job->last_active_unix;
  const double timeout = static_cast<double>(job->spec.idle_timeout_s);
  const double reclaim_at = job->last_active_unix + timeout + ToSeconds(options_.idle_reclaim_grace);
  if (idle >= timeout && !job->idle_warned) {
    job->idle_warned = true;
    job->reason = absl::StrCat("idle since ", FormatUnix(job->last_active_unix), "; reclaim at ",
                               FormatUnix(reclaim_at));
    ATHANOR_LOG(INFO) << "job " << job->id << ": " << job->reason;
    MarkJob(*job);
    DesiredChanged();
  }
  if (job->idle_warned && now >= reclaim_at) {
    BeginStop(job, JobState::kCancelled,
              absl::StrFormat("reclaimed: idle for %.0f s", std::floor(idle)));
  }
}

}  // namespace athanor::coord
