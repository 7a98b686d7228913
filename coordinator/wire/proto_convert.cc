#include "coordinator/wire/proto_convert.h"
#include "coordinator/wire/proto_convert_hangs.h"

#include <chrono>

namespace athanor::coord {

JobSpec FromProto(const rpc::JobSpec& p) {
  JobSpec s;
  s.name = p.name();
  s.tenant = p.tenant();
  s.priority = p.priority();
  s.preemptible = p.preemptible();
  s.nodes = p.nodes();
  s.gpus_per_node = p.gpus_per_node();
  s.command.assign(p.command().begin(), p.command().end());
  s.env.insert(p.env().begin(), p.env().end());
  s.checkpoint_uri = p.checkpoint_uri();
  s.max_restarts = p.max_restarts();
  s.time_limit_s = p.time_limit_s();
  s.grace_period_s = p.grace_period_s();
  s.gpu_model = p.gpu_model();
  s.min_gpu_memory_mb = p.min_gpu_memory_mb();
  s.cpus_per_node = p.cpus_per_node();
  s.memory_mb_per_node = p.memory_mb_per_node();
  s.interactive = p.interactive();
  s.idle_timeout_s = p.idle_timeout_s();
  s.hang_timeout_s = p.hang_timeout_s();
  s.move_off_stragglers = p.move_off_stragglers();
  return s;
}

NodeRecord FromProto(const rpc::RegisterNodeRequest& p) {
  NodeRecord n;
  n.name = p.name();
  n.agent_address = p.agent_address();
  n.host = p.host();
  n.unsandboxed = p.unsandboxed();
  const rpc::NodeInventory& inv = p.inventory();
  n.inventory.gpus = inv.gpus();
  n.inventory.gpu_model = inv.gpu_model();
  n.inventory.gpu_memory_mb = inv.gpu_memory_mb();
  n.inventory.cpus = inv.cpus();
  n.inventory.memory_mb = inv.memory_mb();
  n.inventory.labels.insert(inv.labels().begin(), inv.labels().end());
  return n;
}

std::vector<RankReport> FromProto(
    const google::protobuf::RepeatedPtrField<rpc::RankReport>& reports) {
  std::vector<RankReport> out;
  for (const rpc::RankReport& r : reports) {
    RankReport c;
    c.job_id = r.job_id();
    c.attempt = r.attempt();
    c.rank = r.rank();
    switch (r.phase()) {
      case rpc::RANK_EXITED: c.phase = RankPhase::kExited; break;
      case rpc::RANK_FAILED_TO_START: c.phase = RankPhase::kFailedToStart; break;
      default: c.phase = RankPhase::kRunning; break;
    }
    c.exit_code = r.exit_code();
    c.signal = r.signal();
    c.message = r.message();
    c.signal_from_agent = r.signal_from_agent();
    c.cpu_seconds = r.cpu_seconds();
    c.gpu_utilization = r.gpu_measured() ? r.gpu_utilization() : -1;
    if (r.has_progress()) c.progress = ProgressFromProto(r.progress());
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

rpc::JobState ToProto(JobState s) {
  switch (s) {
    case JobState::kPending: return rpc::JOB_PENDING;
    case JobState::kStarting: return rpc::JOB_STARTING;
    case JobState::kRunning: return rpc::JOB_RUNNING;
    case JobState::kPreempting: return rpc::JOB_PREEMPTING;
    case JobState::kSucceeded: return rpc::JOB_SUCCEEDED;
    case JobState::kFailed: return rpc::JOB_FAILED;
    case JobState::kCancelled: return rpc::JOB_CANCELLED;
  }
  return rpc::JOB_STATE_UNSPECIFIED;
}

rpc::NodeState ToProto(NodeState s) {
  switch (s) {
    case NodeState::kUp: return rpc::NODE_UP;
    case NodeState::kDraining: return rpc::NODE_DRAINING;
    case NodeState::kDrained: return rpc::NODE_DRAINED;
    case NodeState::kDown: return rpc::NODE_DOWN;
    case NodeState::kUnknown: return rpc::NODE_UNKNOWN;
  }
  return rpc::NODE_STATE_UNSPECIFIED;
}

}  // namespace

void ToProto(const JobRecord& job, rpc::Job* out) {
  out->set_id(job.id);
  rpc::JobSpec* s = out->mutable_spec();
  s->set_name(job.spec.name);
  s->set_tenant(job.spec.tenant);
  s->set_priority(job.spec.priority);
  s->set_preemptible(job.spec.preemptible);
  s->set_nodes(job.spec.nodes);
  s->set_gpus_per_node(job.spec.gpus_per_node);
  for (const std::string& a : job.spec.command) s->add_command(a);
  for (const auto& [k, v] : job.spec.env) (*s->mutable_env())[k] = v;
  s->set_checkpoint_uri(job.spec.checkpoint_uri);
  s->set_max_restarts(job.spec.max_restarts);
  s->set_time_limit_s(job.spec.time_limit_s);
  s->set_grace_period_s(job.spec.grace_period_s);
  s->set_gpu_model(job.spec.gpu_model);
  s->set_min_gpu_memory_mb(job.spec.min_gpu_memory_mb);
  s->set_cpus_per_node(job.spec.cpus_per_node);
  s->set_memory_mb_per_node(job.spec.memory_mb_per_node);
  s->set_interactive(job.spec.interactive);
  s->set_idle_timeout_s(job.spec.idle_timeout_s);
  s->set_hang_timeout_s(job.spec.hang_timeout_s);
  s->set_move_off_stragglers(job.spec.move_off_stragglers);
  out->set_state(ToProto(job.state));
  out->set_attempt(job.attempt);
  for (const RankPlacement& p : job.allocation) {
    rpc::RankPlacement* r = out->add_allocation();
    r->set_rank(p.rank);
    r->set_node(p.node);
    r->set_local_rank(p.local_rank);
    r->set_node_rank(p.node_rank);
    for (int32_t g : p.gpu_ids) r->add_gpu_ids(g);
  }
  for (const RankStatus& st : job.ranks) {
    rpc::RankExit* r = out->add_ranks();
    r->set_rank(st.rank);
    r->set_exited(st.exited);
    r->set_exit_code(st.exit_code);
    r->set_signal(st.signal);
    r->set_started(st.started);
  }
  std::string reason = job.reason;
  if (job.stopping) reason = "stopping: " + job.stop_reason;
  out->set_reason(reason);
  out->set_submit_time_unix(job.submit_time_unix);
  out->set_start_time_unix(job.start_time_unix);
  out->set_end_time_unix(job.end_time_unix);
  out->set_restarts(job.restarts);
  out->set_committed_step(job.committed_step);
  out->set_master_addr(job.master_addr);
  out->set_master_port(job.master_port);
  if (job.last_telemetry.step >= 0) ToProto(job.last_telemetry, out->mutable_last_telemetry());
  out->set_gpu_seconds(JobGpuSeconds(
      job, std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()));
  if (job.stopping && job.preempted) {
    out->set_preempt_deadline_unix(static_cast<int64_t>(job.preempt_deadline_unix));
  }
  for (size_t a = 0; a < job.attempt_nodes.size(); ++a) {
    if (job.attempt_nodes[a].empty()) continue;  // started before placements were kept
    rpc::AttemptNodes* attempt = out->add_attempts();
    attempt->set_attempt(static_cast<int32_t>(a + 1));
    for (const std::string& node : job.attempt_nodes[a]) attempt->add_nodes(node);
    if (a < job.attempt_spans.size()) {
      const AttemptSpan& span = job.attempt_spans[a];
      attempt->set_start_unix(span.start);
      attempt->set_end_unix(span.end);
      attempt->set_outcome(span.outcome);
      attempt->set_end_reason(span.reason);
    }
  }
  HangsToProto(job, out);
}

void ToProto(const NodeView& view, rpc::Node* out) {
  const NodeRecord& n = view.record;
  out->set_name(n.name);
  out->set_agent_address(n.agent_address);
  out->set_host(n.host);
  rpc::NodeInventory* inv = out->mutable_inventory();
  inv->set_gpus(n.inventory.gpus);
  inv->set_gpu_model(n.inventory.gpu_model);
  inv->set_gpu_memory_mb(n.inventory.gpu_memory_mb);
  inv->set_cpus(n.inventory.cpus);
  inv->set_memory_mb(n.inventory.memory_mb);
  for (const auto& [k, v] : n.inventory.labels) (*inv->mutable_labels())[k] = v;
  out->set_state(ToProto(n.state));
  out->set_last_heartbeat_unix(n.last_heartbeat_unix);
  out->set_gpus_allocated(view.gpus_allocated);
  for (const std::string& j : view.jobs) out->add_jobs(j);
  out->set_reason(n.reason);
  out->set_unsandboxed(n.unsandboxed);
}

void ToProto(const DesiredRank& d, rpc::RankSpec* out) {
  out->set_job_id(d.job_id);
  out->set_attempt(d.attempt);
  out->set_rank(d.rank);
  for (const std::string& a : d.command) out->add_command(a);
  for (const auto& [k, v] : d.env) (*out->mutable_env())[k] = v;
  for (int32_t g : d.gpu_ids) out->add_gpu_ids(g);
  out->set_terminate(d.terminate);
  out->set_kill_after_ms(d.kill_after_ms);
  out->set_notice(d.notice);
  out->set_archive_workdir(d.archive_workdir);
  out->set_archive_uri(d.archive_uri);
  out->set_tenant(d.tenant);
  out->set_memory_mb(d.memory_mb);
  out->set_cpus(d.cpus);
  out->set_capture_stacks(d.capture_stacks);
}

void ToProto(const TelemetryFigures& t, rpc::TelemetrySample* out) {
  out->set_step(t.step);
  out->set_loss(t.loss);
  out->set_tokens_per_s(t.tokens_per_s);
  out->set_step_ms(t.step_ms);
  out->set_comm_wait_share(t.comm_wait_share);
  out->set_loss_scale(t.loss_scale);
  out->set_skipped_steps(t.skipped_steps);
  out->set_ckpt_stall_ms(t.ckpt_stall_ms);
  out->set_unix_ms(t.unix_ms);
  out->set_attempt(t.attempt);
  out->set_total_steps(t.total_steps);
}

TelemetryFigures FromProto(const rpc::TelemetrySample& p) {
  TelemetryFigures t;
  t.step = p.step();
  t.loss = p.loss();
  t.tokens_per_s = p.tokens_per_s();
  t.step_ms = p.step_ms();
  t.comm_wait_share = p.comm_wait_share();
  t.loss_scale = p.loss_scale();
  t.skipped_steps = p.skipped_steps();
  t.ckpt_stall_ms = p.ckpt_stall_ms();
  t.unix_ms = p.unix_ms();
  t.attempt = p.attempt();
  t.total_steps = p.total_steps();
  return t;
}

}  // namespace athanor::coord
