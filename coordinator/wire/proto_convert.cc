// The records' fields, both ways (proto_convert.h): the one mapping between a
// record and its message. The views clients see are proto_convert_views.cc.
#include "coordinator/wire/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/wire/proto_convert_hangs.h"

namespace athanor::coord {

rpc::JobState ToProto(JobState s) {
  // The wire's values are the record's, shifted past UNSPECIFIED.
  return static_cast<rpc::JobState>(static_cast<int>(s) + 1);
}

absl::StatusOr<JobState> FromProto(rpc::JobState s, JobState if_unset) {
  if (s == rpc::JOB_STATE_UNSPECIFIED) return if_unset;
  if (s < rpc::JOB_PENDING || s > rpc::JOB_CANCELLED) {
    return absl::DataLossError(absl::StrCat("job state ", static_cast<int>(s), " is not a known state"));
  }
  return static_cast<JobState>(static_cast<int>(s) - 1);
}

rpc::NodeState ToProto(NodeState s) { return static_cast<rpc::NodeState>(static_cast<int>(s) + 1); }

absl::StatusOr<NodeState> FromProto(rpc::NodeState s, NodeState if_unset) {
  if (s == rpc::NODE_STATE_UNSPECIFIED) return if_unset;
  if (s < rpc::NODE_UP || s > rpc::NODE_UNKNOWN) {
    return absl::DataLossError(absl::StrCat("node state ", static_cast<int>(s), " is not a known state"));
  }
  return static_cast<NodeState>(static_cast<int>(s) - 1);
}

// The two enums must stay in step for the shift above.
static_assert(rpc::JOB_CANCELLED == static_cast<int>(JobState::kCancelled) + 1);
static_assert(rpc::JOB_PREEMPTING == static_cast<int>(JobState::kPreempting) + 1);
static_assert(rpc::NODE_UNKNOWN == static_cast<int>(NodeState::kUnknown) + 1);
static_assert(rpc::NODE_DRAINED == static_cast<int>(NodeState::kDrained) + 1);

void ToProto(const JobSpec& spec, rpc::JobSpec* s) {
  s->set_name(spec.name);
  s->set_tenant(spec.tenant);
  s->set_priority(spec.priority);
  s->set_preemptible(spec.preemptible);
  s->set_nodes(spec.nodes);
  s->set_gpus_per_node(spec.gpus_per_node);
  for (const std::string& a : spec.command) s->add_command(a);
  for (const auto& [k, v] : spec.env) (*s->mutable_env())[k] = v;
  s->set_checkpoint_uri(spec.checkpoint_uri);
  s->set_max_restarts(spec.max_restarts);
  s->set_time_limit_s(spec.time_limit_s);
  s->set_grace_period_s(spec.grace_period_s);
  s->set_gpu_model(spec.gpu_model);
  s->set_min_gpu_memory_mb(spec.min_gpu_memory_mb);
  s->set_cpus_per_node(spec.cpus_per_node);
  s->set_memory_mb_per_node(spec.memory_mb_per_node);
  s->set_interactive(spec.interactive);
  s->set_idle_timeout_s(spec.idle_timeout_s);
  s->set_hang_timeout_s(spec.hang_timeout_s);
  s->set_move_off_stragglers(spec.move_off_stragglers);
  s->set_image(spec.image);
  for (const VolumeMount& v : spec.volumes) ToProto(v, s->add_volumes());
  s->set_notebook(spec.notebook);
  s->set_restore_snapshot(spec.restore_snapshot);
  s->set_min_nodes(spec.min_nodes);
  s->set_global_batch(spec.global_batch);
}

void ToProto(const VolumeMount& v, rpc::VolumeMount* out) {
  out->set_name(v.name);
  out->set_path(v.path);
  out->set_read_only(v.read_only);
}

VolumeMount FromProto(const rpc::VolumeMount& p) {
  return VolumeMount{p.name(), p.path(), p.read_only()};
}

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
  s.image = p.image();
  for (const rpc::VolumeMount& v : p.volumes()) s.volumes.push_back(FromProto(v));
  s.notebook = p.notebook();
  s.restore_snapshot = p.restore_snapshot();
  s.min_nodes = p.min_nodes();
  s.global_batch = p.global_batch();
  return s;
}

void ToProto(const NodeInventory& inv, rpc::NodeInventory* out) {
  out->set_gpus(inv.gpus);
  out->set_gpu_model(inv.gpu_model);
  out->set_gpu_memory_mb(inv.gpu_memory_mb);
  out->set_cpus(inv.cpus);
  out->set_memory_mb(inv.memory_mb);
  for (const auto& [k, v] : inv.labels) (*out->mutable_labels())[k] = v;
}

NodeInventory FromProto(const rpc::NodeInventory& p) {
  NodeInventory inv;
  inv.gpus = p.gpus();
  inv.gpu_model = p.gpu_model();
  inv.gpu_memory_mb = p.gpu_memory_mb();
  inv.cpus = p.cpus();
  inv.memory_mb = p.memory_mb();
  inv.labels.insert(p.labels().begin(), p.labels().end());
  return inv;
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
  return TelemetryFigures{p.step(),          p.loss(),          p.tokens_per_s(), p.step_ms(),
                          p.comm_wait_share(), p.loss_scale(),  p.skipped_steps(), p.ckpt_stall_ms(),
                          p.unix_ms(),        p.attempt(),       p.total_steps()};
}

void RecordToProto(const JobRecord& job, rpc::Job* out) {
  out->set_id(job.id);
  ToProto(job.spec, out->mutable_spec());
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
    r->set_started(st.started);
    r->set_exited(st.exited);
    r->set_exit_code(st.exit_code);
    r->set_signal(st.signal);
    r->set_message(st.message);
  }
  out->set_reason(job.reason);
  out->set_submit_time_unix(job.submit_time_unix);
  out->set_start_time_unix(job.start_time_unix);
  out->set_end_time_unix(job.end_time_unix);
  out->set_restarts(job.restarts);
  out->set_committed_step(job.committed_step);
  out->set_master_addr(job.master_addr);
  out->set_master_port(job.master_port);
  if (job.last_telemetry.step >= 0) ToProto(job.last_telemetry, out->mutable_last_telemetry());
  if (job.hang.attempt > 0) ToProto(job.hang, out->mutable_last_hang());
  for (const std::string& node : job.avoid_nodes) out->add_avoid_nodes(node);
  for (const std::string& node : job.master_port_taken_on) out->add_master_port_taken_on(node);
  if (!job.last_activity.signal.empty()) {
    rpc::Activity* a = out->mutable_last_activity();
    a->set_signal(job.last_activity.signal);
    a->set_at_unix(static_cast<int64_t>(job.last_activity.at_unix));
    a->set_detail(job.last_activity.detail);
  }
  out->set_advice(job.advice);
  if (job.spec.interactive && job.state == JobState::kRunning && !job.stopping) {
    out->set_reclaim_at_unix(static_cast<int64_t>(job.reclaim_at_unix));
  }
}

absl::Status RecordFromProto(const rpc::Job& p, JobRecord* job) {
  job->id = p.id();
  job->spec = FromProto(p.spec());
  ASSIGN_OR_RETURN(job->state, FromProto(p.state(), JobState::kPending));
  job->attempt = p.attempt();
  for (const rpc::RankPlacement& r : p.allocation()) {
    job->allocation.push_back(RankPlacement{r.rank(), r.node(), r.local_rank(), r.node_rank(),
                                            {r.gpu_ids().begin(), r.gpu_ids().end()}});
  }
  for (const rpc::RankExit& r : p.ranks()) {
    job->ranks.push_back(RankStatus{r.rank(), r.started(), r.exited(), r.exit_code(), r.signal(), r.message()});
  }
  job->reason = p.reason();
  job->submit_time_unix = p.submit_time_unix();
  job->start_time_unix = p.start_time_unix();
  job->end_time_unix = p.end_time_unix();
  job->restarts = p.restarts();
  job->committed_step = p.committed_step();
  job->master_addr = p.master_addr();
  job->master_port = p.master_port();
  if (p.has_last_telemetry()) job->last_telemetry = FromProto(p.last_telemetry());
  if (p.has_last_hang()) job->hang = FromProto(p.last_hang());
  job->avoid_nodes.assign(p.avoid_nodes().begin(), p.avoid_nodes().end());
  job->master_port_taken_on.assign(p.master_port_taken_on().begin(), p.master_port_taken_on().end());
  if (p.has_last_activity()) {
    job->last_activity = Activity{p.last_activity().signal(),
                                  static_cast<double>(p.last_activity().at_unix()),
                                  p.last_activity().detail()};
  }
  job->advice = p.advice();
  job->reclaim_at_unix = static_cast<double>(p.reclaim_at_unix());
  return absl::OkStatus();
}

void RecordToProto(const NodeRecord& n, rpc::Node* out) {
  out->set_name(n.name);
  out->set_agent_address(n.agent_address);
  out->set_host(n.host);
  ToProto(n.inventory, out->mutable_inventory());
  out->set_state(ToProto(n.state));
  out->set_last_heartbeat_unix(n.last_heartbeat_unix);
  out->set_reason(n.reason);
  out->set_unsandboxed(n.unsandboxed);
}

absl::Status RecordFromProto(const rpc::Node& p, NodeRecord* n) {
  n->name = p.name();
  n->agent_address = p.agent_address();
  n->host = p.host();
  n->inventory = FromProto(p.inventory());
  ASSIGN_OR_RETURN(n->state, FromProto(p.state(), NodeState::kUp));
  n->last_heartbeat_unix = p.last_heartbeat_unix();
  n->reason = p.reason();
  n->unsandboxed = p.unsandboxed();
  return absl::OkStatus();
}

}  // namespace athanor::coord
