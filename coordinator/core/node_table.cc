#include "coordinator/core/node_table.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

NodeState FromSched(sched::MemberState s) {
  switch (s) {
    case sched::MemberState::kUp: return NodeState::kUp;
    case sched::MemberState::kDraining: return NodeState::kDraining;
    case sched::MemberState::kDrained: return NodeState::kDrained;
    case sched::MemberState::kDown: return NodeState::kDown;
    case sched::MemberState::kUnknown: return NodeState::kUnknown;
  }
  return NodeState::kUnknown;
}

// What a node's record and its scheduler spec share, listed once for both
// directions (ToSpec, NodeTable::ToRecord), so the two cannot drift:
// `copy(spec_field, record_field)` for each.
template <typename Spec, typename Record, typename Copy>
void SharedNodeFields(Spec& spec, Record& record, Copy copy) {
  copy(spec.name, record.name);
  copy(spec.agent_address, record.agent_address);
  copy(spec.host, record.host);
  copy(spec.unsandboxed, record.unsandboxed);
  copy(spec.gpus, record.inventory.gpus);
  copy(spec.gpu_model, record.inventory.gpu_model);
  copy(spec.gpu_memory_mb, record.inventory.gpu_memory_mb);
  copy(spec.cpus, record.inventory.cpus);
  copy(spec.memory_mb, record.inventory.memory_mb);
  copy(spec.labels, record.inventory.labels);
}

sched::NodeSpec ToSpec(const NodeRecord& n) {
  sched::NodeSpec spec;
  SharedNodeFields(spec, n, [](auto& to, const auto& from) { to = from; });
  return spec;
}

// Job ids are decimal sequence numbers: order them as numbers.
bool BySubmission(const std::string& a, const std::string& b) {
  int64_t x = 0, y = 0;
  if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y;
  return a < b;
}

}  // namespace

const sched::MemberNode* NodeTable::Find(const std::string& name) const {
  std::optional<int> index = sched_->view().membership().Find(name);
  return index ? &sched_->view().membership().node(*index) : nullptr;
}

NodeRecord NodeTable::ToRecord(const sched::MemberNode& n) const {
  NodeRecord r;
  SharedNodeFields(n.spec, r, [](const auto& from, auto& to) { to = from; });
  r.state = FromSched(n.state);
  r.last_heartbeat_unix = static_cast<int64_t>(clock_->ToUnix(n.last_heartbeat));
  r.reason = n.reason;
  r.drain = n.drain;
  return r;
}

void NodeTable::Restore(const std::vector<NodeRecord>& nodes) {
  for (const NodeRecord& n : nodes) {
    absl::Status s = sched_->AddNode(ToSpec(n));
    if (s.ok()) {
      const bool down = n.state == NodeState::kDown;
      s = sched_->SetNodeState(n.name, down ? sched::MemberState::kDown : sched::MemberState::kUnknown)
              .status();
      if (s.ok()) {
        s = sched_->SetNodeNote(
            n.name, n.drain,
            down ? n.reason : "coordinator restarted; waiting for the agent to register again");
      }
    }
    // A node the store holds but the scheduler refuses would leave its jobs
    // without a home: they fail when restored (ClusterState::Restore).
    if (!s.ok()) ATHANOR_LOG(ERROR) << "restore node " << n.name << ": " << s;
    runtime_[n.name] = Runtime{};
  }
}

absl::Status NodeTable::SetReachable(const std::string& name, bool drain) {
  RETURN_IF_ERROR(sched_->SetNodeState(name, drain ? sched::MemberState::kDraining
                                                    : sched::MemberState::kUp)
                      .status());
  const sched::MemberNode* n = Find(name);
  return sched_->SetNodeNote(name, drain, drain ? n->reason : "");
}

absl::Status NodeTable::Register(const NodeRecord& node, const std::vector<RankReport>& ranks) {
  RETURN_IF_ERROR(ValidateName("name", node.name));
  RETURN_IF_ERROR(ValidateInventory(node.inventory));
  if (node.host.size() > kMaxStringBytes || node.agent_address.size() > kMaxStringBytes) {
    return absl::InvalidArgumentError("host/agent_address: longer than 4096 bytes");
  }
  const bool is_new = !Exists(node.name);
  // A node whose jobs hold GPUs must keep its GPU count; it comes back with
  // the inventory those jobs were placed on.
  if (absl::Status s = sched_->AddNode(ToSpec(node)); !s.ok()) {
    if (is_new) return s;
    ATHANOR_LOG(WARNING) << "node " << node.name << ": " << s << "; keeping its old inventory";
  }
  RETURN_IF_ERROR(SetReachable(node.name, Find(node.name)->drain));
  log_->MarkNode(node.name);
  Runtime& rt = runtime_[node.name];
  rt = Runtime{};
  rt.registered = true;
  for (const RankReport& r : ranks) {
    if (r.phase == RankPhase::kRunning) rt.running.insert({r.job_id, r.attempt, r.rank});
  }
  log_->TouchNode(node.name);
  ATHANOR_LOG(INFO) << (is_new ? "registered node " : "node re-registered: ") << node.name << " ("
                    << node.inventory.gpus << " GPUs, agent " << node.agent_address << ")";
  return absl::OkStatus();
}

NodeTable::Beat NodeTable::Heartbeat(const std::string& name, uint64_t acked_generation,
                                     const std::vector<RankReport>& ranks, bool health_ok) {
  auto rt_it = runtime_.find(name);
  const sched::MemberNode* n = Find(name);
  if (n == nullptr || rt_it == runtime_.end() || !rt_it->second.registered) {
    return Beat::kUnregistered;
  }
  Runtime& rt = rt_it->second;
  rt.acked_generation = acked_generation;
  // The node exists (found above): Heartbeat and SetReachable cannot fail.
  if (absl::Status s = sched_->Heartbeat(name); !s.ok()) ATHANOR_LOG(ERROR) << s;
  if (n->state == sched::MemberState::kDown || n->state == sched::MemberState::kUnknown) {
    if (absl::Status s = SetReachable(name, n->drain); !s.ok()) ATHANOR_LOG(ERROR) << s;
    log_->MarkNode(name);
  }
  rt.running.clear();
  for (const RankReport& r : ranks) {
    if (r.phase == RankPhase::kRunning) rt.running.insert({r.job_id, r.attempt, r.rank});
  }
  const bool edge = !health_ok && !rt.health_failed;
  rt.health_failed = !health_ok;
  return edge && !n->drain ? Beat::kHealthFailed : Beat::kOk;
}

std::vector<std::pair<std::string, std::string>> NodeTable::Expire(Duration timeout) {
  std::vector<std::pair<std::string, std::string>> out;
  const TimePoint now = clock_->Now();
  const sched::Membership& m = sched_->view().membership();
  for (int i = 0; i < m.size(); ++i) {
    const sched::MemberNode& n = m.node(i);
    if (n.removed || n.state == sched::MemberState::kDown) continue;
    if (now - n.last_heartbeat <= timeout) continue;
    std::string name = n.spec.name;
    std::string why = absl::StrCat("no heartbeat for ", ToSeconds(now - n.last_heartbeat), " s");
    absl::Status s = sched_->SetNodeState(name, sched::MemberState::kDown).status();
    if (s.ok()) s = sched_->SetNodeNote(name, n.drain, why);
    if (!s.ok()) {
      ATHANOR_LOG(ERROR) << "node " << name << ": " << s;
      continue;
    }
    log_->MarkNode(name);
    ATHANOR_LOG(WARNING) << "node " << name << " DOWN: " << why;
    out.emplace_back(std::move(name), std::move(why));
  }
  return out;
}

absl::Status NodeTable::Drain(const std::string& name, const std::string& reason) {
  const sched::MemberNode* n = Find(name);
  if (n == nullptr) return absl::NotFoundError(absl::StrCat("no node '", name.substr(0, 64), "'"));
  RETURN_IF_ERROR(sched_->SetNodeNote(name, true, reason));
  if (n->state != sched::MemberState::kDown && n->state != sched::MemberState::kUnknown) {
    RETURN_IF_ERROR(sched_->SetNodeState(name, sched::MemberState::kDraining).status());
  }
  log_->MarkNode(name);
  ATHANOR_LOG(INFO) << "node " << name << " draining: " << reason;
  return absl::OkStatus();
}

absl::Status NodeTable::Undrain(const std::string& name) {
  const sched::MemberNode* n = Find(name);
  if (n == nullptr) return absl::NotFoundError(absl::StrCat("no node '", name.substr(0, 64), "'"));
  if (n->state == sched::MemberState::kDraining || n->state == sched::MemberState::kDrained) {
    RETURN_IF_ERROR(SetReachable(name, false));
  } else {
    RETURN_IF_ERROR(sched_->SetNodeNote(name, false, n->reason));
  }
  log_->MarkNode(name);
  ATHANOR_LOG(INFO) << "node " << name << " undrained (" << sched::MemberStateName(n->state) << ")";
  return absl::OkStatus();
}

void NodeTable::Touched(const std::vector<std::string>& nodes) {
  for (const std::string& n : nodes) log_->MarkNode(n);
}

std::optional<NodeRecord> NodeTable::Get(const std::string& name) const {
  const sched::MemberNode* n = Find(name);
  if (n == nullptr) return std::nullopt;
  return ToRecord(*n);
}

std::optional<NodeView> NodeTable::View(const std::string& name) const {
  const sched::MemberNode* n = Find(name);
  if (n == nullptr) return std::nullopt;
  NodeView v{ToRecord(*n), n->spec.gpus - n->free_gpus, JobsOn(name)};
  v.cached_images = n->cached_images;
  return v;
}

void NodeTable::SetCachedImages(const std::string& name, std::vector<std::string> digests) {
  // An unknown node has nothing to show (the heartbeat asks it to register).
  sched_->SetNodeCachedImages(name, std::move(digests)).IgnoreError();
}

std::vector<NodeView> NodeTable::Views() const {
  std::vector<std::string> names;
  const sched::Membership& m = sched_->view().membership();
  for (int i = 0; i < m.size(); ++i) {
    if (!m.node(i).removed) names.push_back(m.node(i).spec.name);
  }
  std::sort(names.begin(), names.end());
  std::vector<NodeView> out;
  for (const std::string& name : names) out.push_back(*View(name));
  return out;
}

bool NodeTable::IsDown(const std::string& name) const {
  const sched::MemberNode* n = Find(name);
  return n == nullptr || n->state == sched::MemberState::kDown;
}

std::vector<std::string> NodeTable::JobsOn(const std::string& name) const {
  std::vector<std::string> out;
  if (const sched::MemberNode* n = Find(name)) {
    for (const auto& [job, hold] : n->holds) out.push_back(job);
  }
  std::sort(out.begin(), out.end(), BySubmission);
  return out;
}

bool NodeTable::Settled(const std::string& name, const RankKey& rank, uint64_t generation) const {
  if (IsDown(name)) return true;
  auto rt = runtime_.find(name);
  if (rt == runtime_.end() || !rt->second.registered) return false;
  return rt->second.acked_generation >= generation && !rt->second.running.count(rank);
}

bool NodeTable::Runs(const std::string& name, const RankKey& rank) const {
  auto rt = runtime_.find(name);
  return rt != runtime_.end() && rt->second.running.count(rank) > 0;
}

}  // namespace athanor::coord
