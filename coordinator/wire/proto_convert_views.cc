// What clients are shown of the records (proto_convert.h): the records'
// fields (proto_convert.cc) and their views; the agents' messages.
#include <chrono>

#include "coordinator/wire/proto_convert.h"
#include "coordinator/wire/proto_convert_hangs.h"

namespace athanor::coord {

void ToProto(const JobRecord& job, rpc::Job* out) {
  RecordToProto(job, out);
  if (job.stopping) out->set_reason("stopping: " + job.stop_reason);
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
      attempt->set_platform_fault(span.platform_fault);
      attempt->set_steps_lost(span.steps_lost);
    }
  }
  StragglersToProto(job.stragglers, out->mutable_stragglers());
}

void ToProto(const NodeView& view, rpc::Node* out) {
  RecordToProto(view.record, out);
  out->set_gpus_allocated(view.gpus_allocated);
  for (const std::string& j : view.jobs) out->add_jobs(j);
  for (const std::string& d : view.cached_images) out->add_cached_images(d);
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
  out->set_image_digest(d.image_digest);
  for (const VolumeMount& v : d.volumes) ToProto(v, out->add_volumes());
  out->set_notebook(d.notebook);
  out->set_restore_key(d.restore_key);
  out->set_snapshot_key(d.snapshot_key);
  if (d.network) {
    rpc::JobNetwork* n = out->mutable_network();
    n->set_address(d.network->address);
    n->set_prefix_length(d.network->prefix_length);
    for (const JobNetworkPeer& p : d.network->peers) {
      rpc::NetworkPeer* peer = n->add_peers();
      peer->set_address(p.address);
      peer->set_host(p.host);
    }
  }
}

NodeRecord FromProto(const rpc::RegisterNodeRequest& p) {
  NodeRecord n;
  n.name = p.name();
  n.agent_address = p.agent_address();
  n.host = p.host();
  n.unsandboxed = p.unsandboxed();
  n.inventory = FromProto(p.inventory());
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
    c.master_port_taken = r.master_port_taken();
    c.cpu_seconds = r.cpu_seconds();
    c.gpu_utilization = r.gpu_measured() ? r.gpu_utilization() : -1;
    if (r.has_progress()) c.progress = ProgressFromProto(r.progress());
    if (r.has_activity() && r.activity().measured()) {
      c.activity_measured = true;
      c.net_bytes = r.activity().net_bytes();
      c.disk_write_bytes = r.activity().disk_write_bytes();
      c.kernels_busy = r.activity().kernels_busy();
      c.kernel_last_activity_unix = r.activity().kernel_last_activity_unix();
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace athanor::coord
