#include "coordinator/observability/metrics_view.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "coordinator/wire/proto_convert.h"
#include "coordinator/wire/proto_convert_hangs.h"

namespace athanor::coord {
namespace {

constexpr int kMaxWhy = 20;
constexpr size_t kMaxFinished = 50;

void AddJob(const JobRecord& job, const ClusterState& state, const TelemetryStore& telemetry,
            int* why_budget, rpc::ClusterView* view) {
  rpc::JobStatus* j = view->add_jobs();
  j->set_id(job.id);
  j->set_name(job.spec.name);
  j->set_tenant(job.spec.tenant);
  j->set_state(JobStateName(job.state));
  // An elastic job running at another size than its most shows its current one.
  const int32_t gpus = job.allocated ? static_cast<int32_t>(job.allocation.size()) : job.spec.nodes * job.spec.gpus_per_node;
  j->set_nodes(gpus / std::max(job.spec.gpus_per_node, 1));
  j->set_gpus(gpus);
  j->set_attempt(job.attempt);
  j->set_restarts(job.restarts);
  j->set_reason(job.stopping ? "stopping: " + job.stop_reason : job.reason);
  j->set_submit_time_unix(job.submit_time_unix);
  j->set_start_time_unix(job.start_time_unix);
  j->set_committed_step(job.committed_step);
  j->set_priority(job.spec.priority);
  StragglersToProto(job.stragglers, j->mutable_stragglers());
  if (job.allocated) {
    std::string last;
    for (const RankPlacement& p : job.allocation) {
      if (p.node != last) j->add_node_names(p.node);
      last = p.node;
    }
  }
  double rate = 0;
  TelemetryFigures latest = telemetry.Latest(job.id, &rate);
  if (latest.step < 0) latest = job.last_telemetry;  // from the store, after a restart
  ToProto(latest, j->mutable_last());
  j->set_steps_per_s(rate);
  if (job.state == JobState::kPending && (*why_budget)-- > 0) {
    absl::StatusOr<WhyResult> why = state.Why(job.id);
    if (why.ok()) {
      for (const std::string& r : why->reasons) j->add_why(r);
      j->set_queue_position(why->queue_position);
    }
  }
}

}  // namespace

rpc::ClusterView BuildClusterView(const ClusterState& state, const TelemetryStore& telemetry,
                                  int64_t now_ms) {
  rpc::ClusterView view;
  view.set_unix_ms(now_ms);
  // GPU slots held by attempts, by node and index.
  std::map<std::string, std::map<int32_t, const JobRecord*>> held;
  for (int64_t seq : state.jobs().active()) {
    const JobRecord& job = state.jobs().all().at(seq);
    for (const RankPlacement& p : job.allocation) {
      for (int32_t g : p.gpu_ids) held[p.node][g] = &job;
    }
  }
  for (const NodeView& n : state.nodes().Views()) {
    rpc::NodeStatus* node = view.add_nodes();
    node->set_name(n.record.name);
    node->set_state(NodeStateName(n.record.state));
    node->set_reason(n.record.reason);
    node->set_gpu_model(n.record.inventory.gpu_model);
    const std::map<int32_t, GpuReading> readings = telemetry.Gpus(n.record.name);
    const auto& mine = held[n.record.name];
    for (int32_t g = 0; g < n.record.inventory.gpus; ++g) {
      rpc::GpuSlot* slot = node->add_gpus();
      slot->set_index(g);
      auto h = mine.find(g);
      if (h != mine.end()) {
        slot->set_job_id(h->second->id);
        slot->set_tenant(h->second->spec.tenant);
      }
      auto r = readings.find(g);
      if (r != readings.end()) {
        slot->set_measured(true);
        slot->set_utilization(r->second.utilization);
      }
    }
  }
  int why_budget = kMaxWhy;
  std::vector<const JobRecord*> finished;
  int32_t queued = 0;
  std::map<std::string, std::pair<int32_t, int32_t>> per_tenant;  // running, pending
  for (const auto& [seq, job] : state.jobs().all()) {
    if (IsTerminal(job.state)) {
      finished.push_back(&job);
      continue;
    }
    if (job.state == JobState::kPending) {
      ++queued;
      ++per_tenant[job.spec.tenant].second;
    } else {
      ++per_tenant[job.spec.tenant].first;
    }
    AddJob(job, state, telemetry, &why_budget, &view);
  }
  const size_t first = finished.size() > kMaxFinished ? finished.size() - kMaxFinished : 0;
  for (size_t i = first; i < finished.size(); ++i) {
    AddJob(*finished[i], state, telemetry, &why_budget, &view);
  }
  view.set_queue_length(queued);
  std::map<std::string, rpc::TenantStatus> tenants;
  auto tenant = [&](const std::string& name) -> rpc::TenantStatus& {
    auto [it, added] = tenants.try_emplace(name);
    if (added) it->second.set_quota_gpus(-1);
    return it->second;
  };
  for (const QuotaRow& q : state.accounts().Quotas()) tenant(q.tenant).set_quota_gpus(q.gpus);
  for (const UsageRow& u : state.accounts().Usage(state.jobs().all(), "", 0)) {
    if (!u.job_id.empty()) continue;
    rpc::TenantStatus& t = tenant(u.tenant);
    t.set_gpu_seconds(u.gpu_seconds);
    t.set_gpus_allocated(u.gpus_in_use);
  }
  for (const auto& [name, counts] : per_tenant) tenant(name);
  for (auto& [name, t] : tenants) {
    rpc::TenantStatus* out = view.add_tenants();
    *out = t;
    out->set_tenant(name);
    auto c = per_tenant.find(name);
    if (c != per_tenant.end()) {
      out->set_jobs_running(c->second.first);
      out->set_jobs_pending(c->second.second);
    }
  }
  return view;
}

}  // namespace athanor::coord
