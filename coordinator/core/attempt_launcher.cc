#include "coordinator/core/attempt_launcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/rank_env.h"

namespace athanor::coord {
namespace {

// SIGTERM -> SIGKILL for the ranks of a hung attempt: room for their agents
// to capture every rank's stacks (bounded there) before the kill.
constexpr int64_t kHangKillAfterMs = 15000;

}  // namespace

void AttemptLauncher::FillPool() {
  if (pool_filled_) return;
  pool_filled_ = true;
  for (int32_t p = options_->master_port_min; p <= options_->master_port_max; ++p) {
    if (!port_holders_.contains(p)) free_ports_.insert(free_ports_.end(), p);
  }
}

int32_t AttemptLauncher::ChoosePort() {
  FillPool();
  if (free_ports_.empty()) return options_->master_port_min;  // every port taken: share one
  auto it = free_ports_.lower_bound(port_cursor_);
  if (it == free_ports_.end()) it = free_ports_.begin();
  port_cursor_ = *it + 1;
  return *it;
}

void AttemptLauncher::Hold(int32_t port) {
  ++port_holders_[port];
  free_ports_.erase(port);
}

void AttemptLauncher::Release(const JobRecord& job) {
  networks_.Release(job.network_subnet);
  auto it = port_holders_.find(job.master_port);
  if (it == port_holders_.end()) return;
  if (--it->second > 0) return;  // still shared
  port_holders_.erase(it);
  if (pool_filled_ && job.master_port >= options_->master_port_min &&
      job.master_port <= options_->master_port_max) {
    free_ports_.insert(job.master_port);
  }
}

void AttemptLauncher::Start(JobRecord* job, const std::vector<sched::NodeAllocation>& placement) {
  // Rank 0's node binds the master port: not one where another process held
  // it for an earlier attempt, when the placement has another.
  std::vector<sched::NodeAllocation> chosen = placement;
  const std::vector<std::string>& taken = job->master_port_taken_on;
  auto usable = std::find_if(chosen.begin(), chosen.end(), [&](const sched::NodeAllocation& n) {
    return std::find(taken.begin(), taken.end(), n.node) == taken.end();
  });
  if (usable != chosen.end()) std::rotate(chosen.begin(), usable, usable + 1);
  const int32_t port = ChoosePort();
  Hold(port);
  job->attempt++;
  job->allocation.clear();
  job->ranks.clear();
  const int32_t g = job->spec.gpus_per_node;
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
  std::optional<NodeRecord> master = nodes_->Get(chosen[0].node);
  job->master_addr = master ? master->host : "";
  job->network_subnet.clear();
  if (networks_.enabled()) {
    // Rank 0's store listens in the attempt's network, at its address there.
    std::optional<std::string> subnet = networks_.Allocate();
    if (subnet) {
      job->network_subnet = *subnet;
      job->master_addr = JobNetworks::Address(*subnet, 0);
    } else {
      job->network_subnet = kNoFreeJobNetwork;
      ATHANOR_LOG(ERROR) << "job " << job->id << " attempt " << job->attempt << ": every /24 of --job-network "
                         << options_->job_network << " is held (" << networks_.held()
                         << " live attempts); its ranks will refuse to start";
    }
  }
  job->master_port = port;
  // The usage interval and the attempt's span start at the same instant:
  // billing charges the one, tenants check it against the other.
  const double placed_at = clock_->UnixNow();
  job->usage.push_back({placed_at, 0, static_cast<int32_t>(job->allocation.size())});
  // Records of attempts started before placements were kept have none: pad.
  job->attempt_nodes.resize(job->attempt - 1);
  job->attempt_nodes.emplace_back();
  for (const sched::NodeAllocation& n : chosen) job->attempt_nodes.back().push_back(n.node);
  job->attempt_spans.resize(job->attempt - 1);
  job->attempt_spans.push_back({placed_at, 0, "", ""});
  job->last_active_unix = clock_->UnixNow();
  job->idle_warned = false;
  log_->MarkJob(job->seq);
  TouchAttemptNodes(log_, *job);
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt << " placed on "
                    << chosen.size() << " node(s), master " << job->master_addr << ":" << port;
}

void AttemptLauncher::AppendDesired(const JobRecord& job, const std::string& node,
                                    std::vector<DesiredRank>* out) const {
  const int32_t world = static_cast<int32_t>(job.allocation.size());
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
    env.coordinator = options_->coordinator_address;
    DesiredRank d;
    d.job_id = job.id;
    d.attempt = job.attempt;
    d.rank = p.rank;
    d.command = job.spec.command;
    d.env = job.spec.env;
    for (auto& [k, v] : env.ToEnvironment()) d.env[k] = v;
    // The job's global batch, kept at this attempt's world (athanor-train).
    if (job.spec.global_batch > 0) d.env["ATHANOR_GLOBAL_BATCH"] = std::to_string(job.spec.global_batch);
    d.gpu_ids = p.gpu_ids;
    d.tenant = job.spec.tenant;
    d.image_digest = job.image_digest;  // resolved at submission (cluster_images.h)
    d.volumes = job.spec.volumes;
    d.notebook = job.spec.notebook;
    d.memory_mb = job.spec.memory_mb_per_node;
    d.cpus = job.spec.cpus_per_node;
    d.terminate = job.stopping;
    d.kill_after_ms = job.preempted ? job.stop_kill_after_ms : options_->kill_after_ms;
    if (job.stopping && job.hang.attempt == job.attempt) {  // hung: stacks first
      d.capture_stacks = true;
      d.kill_after_ms = std::max<int64_t>(d.kill_after_ms, kHangKillAfterMs);
    }
    if (job.spec.interactive) {
      d.archive_workdir = true;
      d.archive_uri = job.spec.checkpoint_uri;
      if (job.idle_warned) d.notice = job.reason;
    }
    if (d.notice.empty()) d.notice = job.billing_notice;
    // Attempts placed before --job-network was on have none, and run on as they are.
    if (!job.network_subnet.empty()) d.network = NetworkView(job, p.node_rank);
    out->push_back(std::move(d));
  }
}

JobNetworkView AttemptLauncher::NetworkView(const JobRecord& job, int32_t node_rank) const {
  JobNetworkView view;
  if (job.network_subnet == kNoFreeJobNetwork) {
    view.peers.push_back({});  // none free: the agent refuses the ranks, saying why
    return view;
  }
  view.address = JobNetworks::Address(job.network_subnet, node_rank);
  if (job.attempt_nodes.size() < static_cast<size_t>(job.attempt)) return view;
  const std::vector<std::string>& nodes = job.attempt_nodes[job.attempt - 1];
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::optional<NodeRecord> node = nodes_->Get(nodes[n]);
    view.peers.push_back({JobNetworks::Address(job.network_subnet, static_cast<int32_t>(n)),
                          node ? node->host : ""});
  }
  return view;
}

}  // namespace athanor::coord
