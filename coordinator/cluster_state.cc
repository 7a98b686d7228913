#include "coordinator/cluster_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/rank_env.h"
#include "common/status.h"
#include "coordinator/validation.h"

namespace athanor::coord {
namespace {

std::string Shorten(const std::string& s) { return s.size() <= 64 ? s : s.substr(0, 64) + "..."; }

}  // namespace

namespace {

sched::SchedulerOptions SchedOptions(const StateOptions& o) {
  sched::SchedulerOptions s;
  s.backfill = o.backfill;
  s.default_grace = o.default_grace;
  s.min_run_time = o.min_run_time;
  return s;
}

}  // namespace

ClusterState::ClusterState(StateOptions options, const Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      sched_(clock, SchedOptions(options_)),
      quotas_(options_.quotas),
      mono_base_(clock->Now()),
      unix_base_(clock->UnixSeconds()) {
  for (const auto& [tenant, gpus] : quotas_) sched_.SetQuota(tenant, gpus);
}

double ClusterState::UnixNow() const {
  return static_cast<double>(unix_base_) + ToSeconds(clock_->Now() - mono_base_);
}

TimePoint ClusterState::FromUnix(double unix) const {
  return clock_->Now() - Seconds(UnixNow() - unix);
}

sched::NodeSpec ClusterState::ToSpec(const NodeRecord& n) {
  sched::NodeSpec spec;
  spec.name = n.name;
  spec.gpus = n.inventory.gpus;
  spec.gpu_model = n.inventory.gpu_model;
  spec.gpu_memory_mb = n.inventory.gpu_memory_mb;
  spec.cpus = n.inventory.cpus;
  spec.memory_mb = n.inventory.memory_mb;
  spec.labels = n.inventory.labels;
  return spec;
}

Duration ClusterState::JobGrace(const JobRecord& job) const {
  return job.spec.grace_period_s > 0 ? Seconds(static_cast<double>(job.spec.grace_period_s))
                                     : options_.default_grace;
}

sched::JobRequest ClusterState::ToRequest(const JobRecord& job) const {
  sched::JobRequest r;
  r.id = job.id;
  r.tenant = job.spec.tenant;
  r.priority = job.spec.priority;
  r.preemptible = job.spec.preemptible;
  r.nodes = job.spec.nodes;
  r.gpus_per_node = job.spec.gpus_per_node;
  r.gpu_model = job.spec.gpu_model;
  r.min_gpu_memory_mb = job.spec.min_gpu_memory_mb;
  r.cpus_per_node = job.spec.cpus_per_node;
  r.memory_mb_per_node = job.spec.memory_mb_per_node;
  r.time_limit = Seconds(static_cast<double>(job.spec.time_limit_s));
  r.grace = JobGrace(job);
  r.submit_seq = static_cast<uint64_t>(job.seq);
  return r;
}

void ClusterState::Restore(std::vector<JobRecord> jobs, std::vector<NodeRecord> nodes,
                           std::map<std::string, int32_t> quotas) {
  for (const auto& [tenant, gpus] : quotas) {
    if (gpus < 0) {
      quotas_.erase(tenant);
      sched_.SetQuota(tenant, -1);
    } else {
      quotas_[tenant] = gpus;
      sched_.SetQuota(tenant, gpus);
    }
  }
  for (NodeRecord& n : nodes) {
    NodeRuntime& rt = runtime_[n.name];
    rt.last_seen = clock_->Now();
    rt.registered = false;
    if (n.state != NodeState::kDown) {
      n.state = NodeState::kUnknown;
      n.reason = "coordinator restarted; waiting for the agent to register again";
    }
    // Known to the scheduler (running jobs hold GPUs there) but given no new
    // work until the agent registers again.
    if (absl::Status s = sched_.AddNode(ToSpec(n)); !s.ok()) {
      ATHANOR_LOG(WARNING) << "restore node " << n.name << ": " << s;
    }
    sched_.SetNodeState(n.name, sched::NodeState::kDown).IgnoreError();
    nodes_[n.name] = std::move(n);
  }
  for (JobRecord& j : jobs) {
    next_seq_ = std::max(next_seq_, j.seq + 1);
    if (j.allocated) active_.insert(j.seq);
    if (j.stopping) stop_generation_[j.seq] = generation_ + 1;
    jobs_[j.seq] = std::move(j);
  }
  for (auto& [seq, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    absl::Status s;
    if (job.allocated) {
      std::vector<sched::NodeAllocation> placement;
      for (const RankPlacement& p : job.allocation) {
        if (placement.empty() || placement.back().node != p.node) placement.push_back({p.node, {}});
        for (int32_t g : p.gpu_ids) placement.back().gpu_ids.push_back(g);
      }
      std::optional<TimePoint> ckpt, deadline;
      if (job.last_checkpoint_unix > 0) ckpt = FromUnix(job.last_checkpoint_unix);
      if (job.stopping && job.preempted) deadline = FromUnix(job.preempt_deadline_unix);
      s = sched_.Restore(ToRequest(job), placement,
                         FromUnix(static_cast<double>(job.start_time_unix)), ckpt, deadline);
    } else {
      s = sched_.Submit(ToRequest(job));
    }
    if (!s.ok()) {
      ATHANOR_LOG(ERROR) << "restore job " << job.id << " into the scheduler: " << s;
      if (!job.allocated) Finish(&job, JobState::kFailed, absl::StrCat("after a restart: ", s.message()));
    }
  }
  DesiredChanged();
}

JobRecord* ClusterState::MutableJob(const std::string& id) {
  int64_t seq = 0;
  if (!absl::SimpleAtoi(id, &seq)) return nullptr;
  auto it = jobs_.find(seq);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobRecord* ClusterState::FindJob(const std::string& id) const {
  return const_cast<ClusterState*>(this)->MutableJob(id);
}

const NodeRecord* ClusterState::FindNode(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::string> ClusterState::SubmitJob(const JobSpec& spec) {
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  JobRecord job;
  job.seq = next_seq_;
  job.id = std::to_string(job.seq);
  job.spec = spec;
  job.state = JobState::kPending;
  job.submit_time_unix = clock_->UnixSeconds();
  job.reason = "waiting for placement";
  if (absl::Status s = sched_.Submit(ToRequest(job)); !s.ok()) {
    std::string msg(s.message());
    // "job N can never fit: ..." -> "job can never fit: ..." (no id was given out).
    std::string prefix = absl::StrCat("job ", job.id, " ");
    if (msg.rfind(prefix, 0) == 0) msg = "job " + msg.substr(prefix.size());
    return absl::Status(s.code(), msg);
  }
  ++next_seq_;
  MarkJob(job);
  std::string id = job.id;
  jobs_[job.seq] = std::move(job);
  Schedule();
  return id;
}

absl::StatusOr<JobRecord> ClusterState::CancelJob(const std::string& id) {
  JobRecord* job = MutableJob(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
  if (IsTerminal(job->state)) return *job;
  if (!job->allocated) {
    sched_.Cancel(job->id).IgnoreError();
    Finish(job, JobState::kCancelled, "cancelled by user");
  } else if (job->stopping) {
    job->stop_outcome = JobState::kCancelled;
    job->stop_reason = "cancelled by user";
    MarkJob(*job);
  } else {
    BeginStop(job, JobState::kCancelled, "cancelled by user");
  }
  return *job;
}

absl::Status ClusterState::RegisterNode(const NodeRecord& node,
                                        const std::vector<RankReport>& ranks) {
  RETURN_IF_ERROR(ValidateName("name", node.name));
  RETURN_IF_ERROR(ValidateInventory(node.inventory));
  if (node.host.size() > kMaxStringBytes || node.agent_address.size() > kMaxStringBytes) {
    return absl::InvalidArgumentError("host/agent_address: longer than 4096 bytes");
  }
  NodeRecord& rec = nodes_[node.name];
  bool is_new = rec.name.empty();
  rec.name = node.name;
  rec.agent_address = node.agent_address;
  rec.host = node.host;
  rec.inventory = node.inventory;
  rec.last_heartbeat_unix = clock_->UnixSeconds();
  if (absl::Status s = sched_.AddNode(ToSpec(rec)); !s.ok()) {
    ATHANOR_LOG(WARNING) << "node " << rec.name << ": " << s << "; keeping its old inventory";
    sched_.SetNodeState(rec.name, sched::NodeState::kUp).IgnoreError();
  }
  if (rec.drain) {
    sched_.SetNodeState(rec.name, sched::NodeState::kDraining).IgnoreError();
    SetNodeState(&rec, NodeState::kDraining, rec.reason);
  } else {
    SetNodeState(&rec, NodeState::kUp, "");
  }
  MarkNode(rec.name);
  NodeRuntime& rt = runtime_[rec.name];
  rt.last_seen = clock_->Now();
  rt.registered = true;
  rt.acked_generation = 0;
  rt.running.clear();
  for (const RankReport& r : ranks) {
    if (r.phase == RankPhase::kRunning) rt.running.insert({r.job_id, r.attempt, r.rank});
  }
  ATHANOR_LOG(INFO) << (is_new ? "registered node " : "node re-registered: ") << rec.name << " ("
                    << rec.inventory.gpus << " GPUs, agent " << rec.agent_address << ")";
  ApplyReports(ranks);
  // Ranks that ran here but that the agent no longer knows are lost.
  for (int64_t seq : std::set<int64_t>(active_)) {
    JobRecord& job = jobs_[seq];
    if (job.stopping) continue;
    for (const RankPlacement& p : job.allocation) {
      const RankStatus& st = job.ranks[p.rank];
      if (p.node != rec.name || !st.started || st.exited) continue;
      if (!rt.running.count({job.id, job.attempt, p.rank})) {
        FailAttempt(&job, absl::StrCat("rank ", p.rank, " on node ", rec.name,
                                       " was lost (its agent restarted)"));
        break;
      }
    }
  }
  DesiredChanged();
  Schedule();
  return absl::OkStatus();
}

bool ClusterState::Heartbeat(const std::string& node, uint64_t known_generation,
                             const std::vector<RankReport>& ranks, bool health_ok,
                             const std::string& health_message) {
  auto it = nodes_.find(node);
  auto rt_it = runtime_.find(node);
  if (it == nodes_.end() || rt_it == runtime_.end() || !rt_it->second.registered) return false;
  NodeRuntime& rt = rt_it->second;
  rt.last_seen = clock_->Now();
  rt.acked_generation = known_generation;
  it->second.last_heartbeat_unix = clock_->UnixSeconds();
  sched_.Heartbeat(node).IgnoreError();
  if (it->second.state == NodeState::kDown || it->second.state == NodeState::kUnknown) {
    if (it->second.drain) {
      SetNodeState(&it->second, NodeState::kDraining, it->second.reason);
      sched_.SetNodeState(node, sched::NodeState::kDraining).IgnoreError();
    } else {
      SetNodeState(&it->second, NodeState::kUp, "");
      sched_.SetNodeState(node, sched::NodeState::kUp).IgnoreError();
    }
    MarkNode(node);
  }
  const bool health_edge = !health_ok && !rt.health_failed;
  rt.health_failed = !health_ok;
  if (health_edge && !it->second.drain) {
    std::string msg = health_message.size() > 512 ? health_message.substr(0, 512) : health_message;
    ATHANOR_LOG(WARNING) << "node " << node << " failed its health check: " << msg;
    DrainNode(node, Duration::zero(), absl::StrCat("health check failed: ", msg)).IgnoreError();
  }
  rt.running.clear();
  for (const RankReport& r : ranks) {
    if (r.phase == RankPhase::kRunning) rt.running.insert({r.job_id, r.attempt, r.rank});
  }
  ApplyReports(ranks);
  for (int64_t seq : std::set<int64_t>(active_)) TrySettle(&jobs_[seq]);
  Schedule();
  return true;
}

void ClusterState::ApplyReports(const std::vector<RankReport>& reports) {
  std::set<int64_t> touched;
  for (const RankReport& r : reports) {
    JobRecord* job = MutableJob(r.job_id);
    if (job == nullptr || job->attempt != r.attempt || !job->allocated) continue;
    if (r.rank < 0 || r.rank >= static_cast<int32_t>(job->ranks.size())) continue;
    RankStatus& st = job->ranks[r.rank];
    if (st.exited) continue;
    if (job->spec.interactive) TrackUse(job, r);
    if (r.phase == RankPhase::kRunning) {
      if (st.started) continue;
      st.started = true;
    } else {
      st.started = st.started || r.phase == RankPhase::kExited;
      st.exited = true;
      st.exit_code = r.phase == RankPhase::kFailedToStart && r.exit_code == 0 ? 127 : r.exit_code;
      st.signal = r.signal;
      if (r.phase == RankPhase::kFailedToStart) {
        ATHANOR_LOG(WARNING) << "job " << job->id << " rank " << r.rank
                             << " failed to start: " << r.message;
      }
    }
    MarkJob(*job);
    touched.insert(job->seq);
  }
  for (int64_t seq : touched) EvaluateJob(&jobs_[seq]);
}

void ClusterState::EvaluateJob(JobRecord* job) {
  if (job->stopping) {
    TrySettle(job);
    return;
  }
  bool all_started = true, all_ok = true;
  for (const RankStatus& st : job->ranks) {
    all_started = all_started && st.started;
    all_ok = all_ok && st.exited && st.exit_code == 0;
    if (st.exited && st.exit_code != 0) {
      std::string node;
      for (const RankPlacement& p : job->allocation) {
        if (p.rank == st.rank) node = p.node;
      }
      std::string how = st.signal != 0 ? absl::StrCat("was killed by signal ", st.signal, " (exit code ",
                                                      st.exit_code, ")")
                                       : absl::StrCat("exited with code ", st.exit_code);
      FailAttempt(job, absl::StrCat("rank ", st.rank, " on node ", node, " ", how));
      return;
    }
  }
  if (all_ok) {
    Finish(job, JobState::kSucceeded, "");
    return;
  }
  if (all_started && job->state == JobState::kStarting) {
    job->state = JobState::kRunning;
    MarkJob(*job);
  }
}

void ClusterState::BeginPreempt(JobRecord* job, Duration grace, const std::string& reason) {
  if (job->stopping || !job->allocated) return;
  job->preempted = true;
  job->stop_kill_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(grace).count();
  job->preempt_deadline_unix = UnixNow() + ToSeconds(grace);
  job->state = JobState::kPreempting;
  sched_.MarkPreempting(job->id, clock_->Now() + grace).IgnoreError();
  BeginStop(job, JobState::kPending, reason);
}

void ClusterState::FailAttempt(JobRecord* job, const std::string& reason) {
  bool requeue = job->restarts < job->spec.max_restarts;
  BeginStop(job, requeue ? JobState::kPending : JobState::kFailed, reason);
}

void ClusterState::BeginStop(JobRecord* job, JobState outcome, const std::string& reason) {
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt << " stopping ("
                    << JobStateName(outcome) << "): " << reason;
  job->stopping = true;
  job->stop_outcome = outcome;
  job->stop_reason = reason;
  MarkJob(*job);
  DesiredChanged();
  stop_generation_[job->seq] = generation_;
  TrySettle(job);
}

bool ClusterState::RankSettled(const JobRecord& job, const RankPlacement& p) const {
  if (job.ranks[p.rank].exited) return true;
  auto n = nodes_.find(p.node);
  if (n == nodes_.end() || n->second.state == NodeState::kDown) return true;
  auto rt = runtime_.find(p.node);
  if (rt == runtime_.end() || !rt->second.registered) return false;
  auto sg = stop_generation_.find(job.seq);
  uint64_t needed = sg == stop_generation_.end() ? 0 : sg->second;
  return rt->second.acked_generation >= needed &&
         !rt->second.running.count({job.id, job.attempt, p.rank});
}

void ClusterState::TrySettle(JobRecord* job) {
  if (!job->stopping) return;
  for (const RankPlacement& p : job->allocation) {
    if (!RankSettled(*job, p)) return;
  }
  Finish(job, job->stop_outcome, job->stop_reason);
}

void ClusterState::Finish(JobRecord* job, JobState outcome, const std::string& reason) {
  if (job->allocated) {
    DesiredChanged();
    if (!job->usage.empty() && job->usage.back().end == 0) job->usage.back().end = UnixNow();
    absl::Status s = sched_.OnJobExited(job->id, outcome == JobState::kPending);
    if (absl::IsNotFound(s) && outcome == JobState::kPending) s = sched_.Submit(ToRequest(*job));
    if (!s.ok()) ATHANOR_LOG(WARNING) << "scheduler: job " << job->id << " exit: " << s;
  }
  bool was_allocated = job->allocated;
  job->allocated = false;
  active_.erase(job->seq);
  stop_generation_.erase(job->seq);
  for (auto it = cpu_samples_.begin(); it != cpu_samples_.end();) {
    it = it->first.first == job->seq ? cpu_samples_.erase(it) : std::next(it);
  }
  job->stopping = false;
  bool preempted = job->preempted;
  job->preempted = false;
  job->idle_warned = false;
  job->last_active_unix = 0;
  if (outcome == JobState::kPending) {
    if (!preempted) job->restarts++;
    job->state = JobState::kPending;
    job->reason = absl::StrCat("requeued after attempt ", job->attempt, ": ", reason);
  } else {
    job->state = outcome;
    job->reason = reason;
    job->end_time_unix = clock_->UnixSeconds();
  }
  ATHANOR_LOG(INFO) << "job " << job->id << " -> " << JobStateName(job->state)
                    << (job->reason.empty() ? "" : ": ") << job->reason;
  MarkJob(*job);
  if (was_allocated) UpdateDrained();
}

void ClusterState::Tick() {
  TimePoint now = clock_->Now();
  for (auto& [name, node] : nodes_) {
    NodeRuntime& rt = runtime_[name];
    if (node.state == NodeState::kDown || now - rt.last_seen <= options_.heartbeat_timeout) continue;
    std::string why = absl::StrCat("no heartbeat for ", ToSeconds(now - rt.last_seen), " s");
    SetNodeState(&node, NodeState::kDown, why);
    sched_.SetNodeState(name, sched::NodeState::kDown).IgnoreError();
    MarkNode(name);
    ATHANOR_LOG(WARNING) << "node " << name << " DOWN: " << why;
    for (int64_t seq : std::set<int64_t>(active_)) {
      JobRecord& job = jobs_[seq];
      bool here = std::any_of(job.allocation.begin(), job.allocation.end(),
                              [&](const RankPlacement& p) { return p.node == name; });
      if (!here) continue;
      if (job.stopping) {
        TrySettle(&job);
      } else {
        FailAttempt(&job, absl::StrCat("node ", name, " went DOWN (", why, ")"));
      }
    }
  }
  for (int64_t seq : std::set<int64_t>(active_)) {
    TrySettle(&jobs_[seq]);
    if (active_.count(seq)) CheckIdle(&jobs_[seq]);
  }
  Schedule();
}

void ClusterState::SetNodeState(NodeRecord* node, NodeState state, const std::string& reason) {
  node->state = state;
  node->reason = reason;
}

void ClusterState::Schedule() {
  for (const sched::Decision& d : sched_.Schedule()) {
    JobRecord* job = MutableJob(d.job);
    if (job == nullptr) {
      ATHANOR_LOG(ERROR) << "scheduler decided on unknown job " << d.job;
      continue;
    }
    if (d.kind == sched::Decision::Kind::kStart) {
      StartAttempt(job, d.placement);
    } else {
      BeginPreempt(job, d.grace, "preempted for a higher-priority job");
    }
  }
}

int32_t ClusterState::ChooseMasterPort() {
  std::set<int32_t> used;
  for (int64_t seq : active_) used.insert(jobs_[seq].master_port);
  int32_t span = options_.master_port_max - options_.master_port_min + 1;
  for (int32_t i = 0; i < span; ++i) {
    int32_t port = options_.master_port_min + (port_cursor_ + i) % span;
    if (!used.count(port)) {
      port_cursor_ = (port_cursor_ + i + 1) % span;
      return port;
    }
  }
  return 0;
}

void ClusterState::StartAttempt(JobRecord* job,
                                const std::vector<sched::NodeAllocation>& chosen) {
  int32_t port = ChooseMasterPort();
  if (port == 0) port = options_.master_port_min;  // every port taken: share one
  job->attempt++;
  job->allocation.clear();
  job->ranks.clear();
  int32_t g = job->spec.gpus_per_node;
  for (size_t n = 0; n < chosen.size(); ++n) {
    for (int32_t l = 0; l < g; ++l) {
      RankPlacement p;
      p.rank = static_cast<int32_t>(n) * g + l;
      p.node = chosen[n].node;
      p.local_rank = l;
      p.node_rank = static_cast<int32_t>(n);
      p.gpu_ids = {static_cast<int32_t>(chosen[n].gpu_ids[l])};
      job->allocation.push_back(p);
      job->ranks.push_back(RankStatus{p.rank});
    }
  }
  job->allocated = true;
  job->state = JobState::kStarting;
  job->reason = "";
  job->start_time_unix = clock_->UnixSeconds();
  job->master_addr = nodes_[chosen[0].node].host;
  job->master_port = port;
  job->usage.push_back({UnixNow(), 0, job->spec.nodes * job->spec.gpus_per_node});
  // Records of attempts started before placements were kept have none: pad.
  job->attempt_nodes.resize(job->attempt - 1);
  job->attempt_nodes.emplace_back();
  for (const sched::NodeAllocation& n : chosen) job->attempt_nodes.back().push_back(n.node);
  job->last_active_unix = UnixNow();
  job->idle_warned = false;
  active_.insert(job->seq);
  MarkJob(*job);
  DesiredChanged();
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt << " placed on "
                    << chosen.size() << " node(s), master " << job->master_addr << ":" << port;
}

std::vector<DesiredRank> ClusterState::DesiredFor(const std::string& node) const {
  std::vector<DesiredRank> out;
  for (int64_t seq : active_) {
    const JobRecord& job = jobs_.at(seq);
    int32_t world = static_cast<int32_t>(job.allocation.size());
    for (const RankPlacement& p : job.allocation) {
      if (p.node != node) continue;
      RankEnv env;
      env.rank = p.rank;
      env.world_size = world;
      env.local_rank = p.local_rank;
      env.local_world_size = job.spec.gpus_per_node;
      env.node_rank = p.node_rank;
      env.master_addr = job.master_addr;
      env.master_port = job.master_port;
      env.cuda_visible_devices = absl::StrJoin(p.gpu_ids, ",");
      env.job_id = job.id;
      env.attempt = job.attempt;
      env.checkpoint_uri = job.spec.checkpoint_uri;
      env.coordinator = options_.coordinator_address;
      DesiredRank d;
      d.job_id = job.id;
      d.attempt = job.attempt;
      d.rank = p.rank;
      d.command = job.spec.command;
      d.env = job.spec.env;
      for (auto& [k, v] : env.ToEnvironment()) d.env[k] = v;
      d.gpu_ids = p.gpu_ids;
      d.terminate = job.stopping;
      d.kill_after_ms = job.preempted ? job.stop_kill_after_ms : options_.kill_after_ms;
      if (job.spec.interactive) {
        d.archive_workdir = true;
        d.archive_uri = job.spec.checkpoint_uri;
        if (job.idle_warned) d.notice = job.reason;
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<JobRecord> ClusterState::Jobs(bool include_finished) const {
  std::vector<JobRecord> out;
  for (const auto& [seq, job] : jobs_) {
    if (include_finished || !IsTerminal(job.state)) out.push_back(job);
  }
  return out;
}

std::vector<NodeView> ClusterState::Nodes() const {
  std::vector<NodeView> out;
  for (const auto& [name, node] : nodes_) {
    NodeView v{node, 0, {}};
    for (int64_t seq : active_) {
      const JobRecord& job = jobs_.at(seq);
      bool here = false;
      for (const RankPlacement& p : job.allocation) {
        if (p.node != name) continue;
        v.gpus_allocated += static_cast<int32_t>(p.gpu_ids.size());
        here = true;
      }
      if (here) v.jobs.push_back(job.id);
    }
    out.push_back(std::move(v));
  }
  return out;
}

Changes ClusterState::TakeChanges() {
  Changes c;
  for (int64_t seq : dirty_jobs_) c.jobs.push_back(jobs_[seq]);
  for (const std::string& n : dirty_nodes_) c.nodes.push_back(nodes_[n]);
  c.quotas = dirty_quotas_;
  dirty_jobs_.clear();
  dirty_nodes_.clear();
  dirty_quotas_.clear();
  return c;
}

void ClusterState::ReturnChanges(const Changes& changes) {
  for (const JobRecord& j : changes.jobs) dirty_jobs_.insert(j.seq);
  for (const NodeRecord& n : changes.nodes) dirty_nodes_.insert(n.name);
  for (const auto& [t, g] : changes.quotas) dirty_quotas_.emplace(t, g);
}

}  // namespace athanor::coord
