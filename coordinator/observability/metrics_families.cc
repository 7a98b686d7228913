#include "coordinator/observability/metrics_families.h"

#include <map>
#include <string>
#include <limits>
#include <tuple>

#include "common/logging.h"
#include "coordinator/billing/bill.h"

namespace athanor::coord {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

class Builder {
 public:
  // Families are filled through references while later ones are added, so
  // the vector must never reallocate meanwhile: room is made up front.
  static constexpr size_t kMaxFamilies = 32;
  explicit Builder(std::vector<MetricFamily>* out) : out_(out), limit_(out->size() + kMaxFamilies) {
    out_->reserve(limit_);
  }
  MetricFamily& Family(const std::string& name, const std::string& help, MetricType type) {
    ATHANOR_CHECK(out_->size() < limit_) << "raise Builder::kMaxFamilies";
    out_->push_back(MetricFamily{name, help, type, {}});
    return out_->back();
  }
  static void Gauge(MetricFamily& f, Labels labels, double v) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = v;
    f.metric.push_back(std::move(m));
  }
  static void Counter(MetricFamily& f, Labels labels, double v) {
    ClientMetric m;
    m.label = std::move(labels);
    m.counter.value = v;
    f.metric.push_back(std::move(m));
  }

 private:
  std::vector<MetricFamily>* out_;
  const size_t limit_;
};

void JobFamilies(const rpc::ClusterView& view, Builder& b) {
  // Every state appears for every tenant seen, so a state's series drops to 0
  // instead of vanishing.
  static const char* kStates[] = {"PENDING",   "STARTING", "RUNNING",  "PREEMPTING",
                                  "SUCCEEDED", "FAILED",   "CANCELLED"};
  std::map<std::pair<std::string, std::string>, int> jobs;
  for (const rpc::TenantStatus& t : view.tenants()) {
    for (const char* s : kStates) jobs[{s, t.tenant()}] = 0;
  }
  for (const rpc::JobStatus& j : view.jobs()) ++jobs[{j.state(), j.tenant()}];
  MetricFamily& f = b.Family("athanor_jobs", "Jobs by state and tenant (finished: the newest 50 only).",
                             MetricType::Gauge);
  for (const auto& [key, n] : jobs) Builder::Gauge(f, {{"state", key.first}, {"tenant", key.second}}, n);
  MetricFamily& q = b.Family("athanor_queue_length", "Jobs waiting (PENDING).", MetricType::Gauge);
  Builder::Gauge(q, {}, view.queue_length());

  MetricFamily& steps = b.Family("athanor_job_steps_total",
                                 "Training steps done by the job (rank 0's newest step; telemetry).",
                                 MetricType::Counter);
  MetricFamily& rate = b.Family("athanor_job_steps_per_second",
                                "Training steps per second over the last 30 s of telemetry.",
                                MetricType::Gauge);
  MetricFamily& loss = b.Family("athanor_job_loss", "Training loss of the newest step.", MetricType::Gauge);
  MetricFamily& tps = b.Family("athanor_job_tokens_per_second",
                               "Tokens per second of the newest step (whole job).", MetricType::Gauge);
  MetricFamily& step_s = b.Family("athanor_job_step_seconds", "Wall time of the newest step.",
                                  MetricType::Gauge);
  MetricFamily& wait = b.Family("athanor_job_allreduce_wait_ratio",
                                "Share of the newest step spent waiting on gradient all-reduce (0..1).",
                                MetricType::Gauge);
  MetricFamily& scale = b.Family("athanor_job_loss_scale", "Mixed-precision loss scale of the newest step.",
                                 MetricType::Gauge);
  MetricFamily& skipped = b.Family("athanor_job_skipped_steps",
                                   "Steps skipped this attempt (fp16 overflow).", MetricType::Gauge);
  MetricFamily& stall = b.Family("athanor_job_checkpoint_stall_seconds",
                                 "Training stall of the newest checkpoint save.", MetricType::Gauge);
  MetricFamily& straggler = b.Family(
      "athanor_job_straggler_ratio",
      "A rank flagged as a straggler: its compute per step over the other ranks' median (present while flagged).",
      MetricType::Gauge);
  for (const rpc::JobStatus& j : view.jobs()) {
    if (j.state() != "RUNNING") continue;
    for (const rpc::RankFlag& f : j.stragglers()) {
      Builder::Gauge(straggler,
                     {{"job_id", j.id()}, {"tenant", j.tenant()}, {"rank", std::to_string(f.rank())}, {"node", f.node()}},
                     f.ratio());
    }
  }
  for (const rpc::JobStatus& j : view.jobs()) {
    if (j.last().step() < 0 || (j.state() != "RUNNING" && j.state() != "PREEMPTING")) continue;
    Labels l = {{"job_id", j.id()}, {"tenant", j.tenant()}};
    const rpc::TelemetrySample& t = j.last();
    Builder::Counter(steps, l, static_cast<double>(t.step()));
    Builder::Gauge(rate, l, j.steps_per_s());
    Builder::Gauge(loss, l, t.loss());
    Builder::Gauge(tps, l, t.tokens_per_s());
    Builder::Gauge(step_s, l, t.step_ms() / 1e3);
    Builder::Gauge(wait, l, t.comm_wait_share());
    Builder::Gauge(scale, l, t.loss_scale());
    Builder::Gauge(skipped, l, static_cast<double>(t.skipped_steps()));
    Builder::Gauge(stall, l, t.ckpt_stall_ms() / 1e3);
  }
}

void NodeFamilies(const rpc::ClusterView& view, Builder& b) {
  MetricFamily& cap = b.Family("athanor_node_gpus", "GPUs a node has.", MetricType::Gauge);
  MetricFamily& alloc = b.Family("athanor_node_gpus_allocated",
                                 "GPUs allocated on a node, by the tenant holding them.", MetricType::Gauge);
  MetricFamily& util = b.Family("athanor_node_gpu_utilization_ratio",
                                "GPU utilisation as the node's agent measured it (absent where not measured).",
                                MetricType::Gauge);
  std::map<std::string, int> nodes_by_state;
  for (const rpc::NodeStatus& n : view.nodes()) {
    ++nodes_by_state[n.state()];
    Builder::Gauge(cap, {{"node", n.name()}}, n.gpus_size());
    std::map<std::string, int> by_tenant;
    for (const rpc::GpuSlot& g : n.gpus()) {
      if (!g.job_id().empty()) ++by_tenant[g.tenant()];
      if (g.measured()) {
        Builder::Gauge(util, {{"node", n.name()}, {"gpu", std::to_string(g.index())}},
                       g.utilization() / 100.0);
      }
    }
    for (const auto& [tenant, n_alloc] : by_tenant) {
      Builder::Gauge(alloc, {{"node", n.name()}, {"tenant", tenant}}, n_alloc);
    }
  }
  MetricFamily& states = b.Family("athanor_nodes", "Nodes by state.", MetricType::Gauge);
  for (const auto& [state, n] : nodes_by_state) Builder::Gauge(states, {{"state", state}}, n);
}

void TenantFamilies(const rpc::ClusterView& view, Builder& b) {
  MetricFamily& alloc = b.Family("athanor_tenant_gpus_allocated", "GPUs a tenant's jobs hold.",
                                 MetricType::Gauge);
  MetricFamily& quota = b.Family("athanor_tenant_gpu_quota", "A tenant's GPU quota (absent: none).",
                                 MetricType::Gauge);
  MetricFamily& used = b.Family("athanor_tenant_gpu_seconds_total", "GPU-seconds a tenant's jobs held.",
                                MetricType::Counter);
  for (const rpc::TenantStatus& t : view.tenants()) {
    Builder::Gauge(alloc, {{"tenant", t.tenant()}}, t.gpus_allocated());
    if (t.quota_gpus() >= 0) Builder::Gauge(quota, {{"tenant", t.tenant()}}, t.quota_gpus());
    Builder::Counter(used, {{"tenant", t.tenant()}}, t.gpu_seconds());
  }
}

void CounterFamilies(const LifecycleCounters& c, Builder& b) {
  MetricFamily& pre = b.Family("athanor_preemptions_total",
                               "Attempts preempted, by reason (priority, admin, drain, straggler, master_port, credit).",
                               MetricType::Counter);
  for (const char* r : {"priority", "admin", "drain", "straggler", "master_port", "credit"}) {
    auto it = c.preemptions.find(r);
    Builder::Counter(pre, {{"reason", r}}, it == c.preemptions.end() ? 0 : it->second);
  }
  MetricFamily& req = b.Family("athanor_requeues_total",
                               "Jobs put back in the queue, by cause (preemption, failure, resize).",
                               MetricType::Counter);
  for (const char* r : {"preemption", "failure", "resize"}) {
    auto it = c.requeues.find(r);
    Builder::Counter(req, {{"cause", r}}, it == c.requeues.end() ? 0 : it->second);
  }
  MetricFamily& resize = b.Family("athanor_job_resizes_total",
                                  "Elastic jobs resized, by direction (shrunk: a node lost or taken; grown: "
                                  "nodes free at a checkpoint).",
                                  MetricType::Counter);
  for (const char* d : {"shrunk", "grown"}) {
    auto it = c.resizes.find(d);
    Builder::Counter(resize, {{"direction", d}}, it == c.resizes.end() ? 0 : it->second);
  }
  MetricFamily& pend = b.Family("athanor_job_pending_seconds",
                                "Time from submission to a job's first start.", MetricType::Histogram);
  ClientMetric m;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LifecycleCounters::kPendingBuckets.size(); ++i) {
    cumulative += c.pending_buckets[i];
    m.histogram.bucket.push_back({cumulative, LifecycleCounters::kPendingBuckets[i]});
  }
  cumulative += c.pending_buckets.back();
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = c.pending_count;
  m.histogram.sample_sum = c.pending_sum_s;
  pend.metric.push_back(std::move(m));
}

// bill.h's level of a TenantBalance's status, by its name there.
int LevelNumber(const std::string& status) {
  for (CreditLevel l : {CreditLevel::kOk, CreditLevel::kLow, CreditLevel::kVeryLow, CreditLevel::kOut}) {
    if (status == CreditLevelName(l)) return static_cast<int>(l);
  }
  return 0;
}

}  // namespace

void AppendBillingFamilies(const std::vector<billing::TenantBalance>& balances,
                           std::vector<MetricFamily>* out) {
  if (balances.empty()) return;
  Builder b(out);
  MetricFamily& spent = b.Family("athanor_tenant_spend_micros_total",
                                 "What a tenant's usage cost, ever, in micro-units: accruals less refunds.",
                                 MetricType::Counter);
  MetricFamily& balance = b.Family("athanor_tenant_balance_micros",
                                   "A tenant's balance in micro-units (every ledger entry, ever).",
                                   MetricType::Gauge);
  MetricFamily& status = b.Family("athanor_tenant_credit_status",
                                  "A tenant's credit level: 0 ok, 1 low, 2 very low, 3 out of credit.",
                                  MetricType::Gauge);
  for (const billing::TenantBalance& t : balances) {
    Builder::Counter(spent, {{"tenant", t.tenant()}}, static_cast<double>(t.spent_micros()));
    Builder::Gauge(balance, {{"tenant", t.tenant()}}, static_cast<double>(t.balance_micros()));
    Builder::Gauge(status, {{"tenant", t.tenant()}}, LevelNumber(t.status()));
  }
}

void AppendViewFamilies(const rpc::ClusterView& view, const LifecycleCounters& counters,
                        std::vector<MetricFamily>* out) {
  Builder b(out);
  JobFamilies(view, b);
  NodeFamilies(view, b);
  TenantFamilies(view, b);
  CounterFamilies(counters, b);
  std::erase_if(*out, [](const MetricFamily& f) { return f.metric.empty(); });
}

}  // namespace athanor::coord
