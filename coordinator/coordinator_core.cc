#include "coordinator/coordinator_core.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "checkpoint/catalog.h"
#include "checkpoint/object_store.h"
#include "common/status.h"

namespace athanor::coord {

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    StateOptions options, const std::string& state_path, const Clock* clock,
    Duration tick_interval, Duration checkpoint_poll) {
  ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, JobStore::Open(state_path));
  ASSIGN_OR_RETURN(JobStore::Contents contents, store->LoadAll());
  ATHANOR_LOG(INFO) << "state " << state_path << ": " << contents.jobs.size() << " job(s), "
                    << contents.nodes.size() << " node(s)";
  std::unique_ptr<CoordinatorCore> core(new CoordinatorCore(std::move(options), clock, std::move(store)));
  {
    absl::MutexLock lock(&core->mu_);
    core->state_.Restore(std::move(contents.jobs), std::move(contents.nodes),
                         std::move(contents.quotas));
    core->state_.TakeChanges();  // restoring changes nothing on disk
    core->published_generation_ = core->state_.generation();
  }
  core->ticker_ = std::thread([c = core.get(), tick_interval] { c->TickLoop(tick_interval); });
  if (checkpoint_poll > Duration::zero()) {
    core->checkpoint_poller_ =
        std::thread([c = core.get(), checkpoint_poll] { c->CheckpointLoop(checkpoint_poll); });
  }
  return core;
}

CoordinatorCore::CoordinatorCore(StateOptions options, const Clock* clock,
                                 std::unique_ptr<JobStore> store)
    : state_(std::move(options), clock), store_(std::move(store)) {}

CoordinatorCore::~CoordinatorCore() {
  Shutdown();
  if (ticker_.joinable()) ticker_.join();
  if (checkpoint_poller_.joinable()) checkpoint_poller_.join();
}

void CoordinatorCore::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  changed_.SignalAll();
}

absl::Status CoordinatorCore::PersistLocked() {
  Changes changes = state_.TakeChanges();
  absl::Status s = store_->Commit(changes);
  if (!s.ok()) {
    state_.ReturnChanges(changes);  // retried with the next operation or tick
    ATHANOR_LOG(ERROR) << "cannot persist state: " << s;
    return absl::UnavailableError(absl::StrCat("coordinator store: ", s.message()));
  }
  if (state_.generation() != published_generation_) {
    published_generation_ = state_.generation();
    changed_.SignalAll();
  }
  return absl::OkStatus();
}

void CoordinatorCore::TickLoop(Duration interval) {
  absl::MutexLock lock(&mu_);
  while (!shutdown_) {
    changed_.WaitWithTimeout(&mu_, absl::FromChrono(interval));
    if (shutdown_) break;
    state_.Tick();
    PersistLocked().IgnoreError();  // logged; retried on the next tick
  }
}

absl::StatusOr<std::string> CoordinatorCore::SubmitJob(const JobSpec& spec) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::string id, state_.SubmitJob(spec));
  RETURN_IF_ERROR(PersistLocked());
  return id;
}

absl::StatusOr<JobRecord> CoordinatorCore::CancelJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(JobRecord job, state_.CancelJob(id));
  RETURN_IF_ERROR(PersistLocked());
  return job;
}

absl::StatusOr<JobRecord> CoordinatorCore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  const JobRecord* job = state_.FindJob(id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job '", id.substr(0, 64), "'"));
  }
  return *job;
}

std::vector<JobRecord> CoordinatorCore::ListJobs(bool include_finished, const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  std::vector<JobRecord> out;
  for (JobRecord& j : state_.Jobs(include_finished)) {
    if (tenant.empty() || j.spec.tenant == tenant) out.push_back(std::move(j));
  }
  return out;
}

std::vector<NodeView> CoordinatorCore::ListNodes() {
  absl::MutexLock lock(&mu_);
  return state_.Nodes();
}

absl::Status CoordinatorCore::RegisterNode(const NodeRecord& node,
                                           const std::vector<RankReport>& ranks) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(state_.RegisterNode(node, ranks));
  return PersistLocked();
}

absl::StatusOr<HeartbeatResult> CoordinatorCore::Heartbeat(const std::string& node,
                                                           uint64_t known_generation,
                                                           const std::vector<RankReport>& ranks,
                                                           Duration max_wait, bool health_ok,
                                                           const std::string& health_message) {
  absl::MutexLock lock(&mu_);
  HeartbeatResult result;
  if (!state_.Heartbeat(node, known_generation, ranks, health_ok, health_message)) {
    result.reregister = true;
    return result;
  }
  RETURN_IF_ERROR(PersistLocked());
  absl::Time deadline = absl::Now() + absl::FromChrono(max_wait);
  while (!shutdown_ && published_generation_ == known_generation) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  result.generation = published_generation_;
  result.desired = state_.DesiredFor(node);
  return result;
}

absl::StatusOr<std::vector<LogTarget>> CoordinatorCore::LogTargets(const std::string& job_id,
                                                                    int32_t rank, int32_t attempt) {
  absl::MutexLock lock(&mu_);
  const JobRecord* job = state_.FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", job_id.substr(0, 64), "'"));
  if (job->attempt == 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job->id, " has not started yet"));
  }
  if (attempt < 0 || attempt > job->attempt) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: ", attempt, " is not an attempt of job ",
                                                   job->id, " (attempts so far: ", job->attempt, ")"));
  }
  if (attempt == 0) attempt = job->attempt;
  int32_t world = job->spec.nodes * job->spec.gpus_per_node;
  if (rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", rank, " is not a rank of job ", job->id, " (world size ", world, ")"));
  }
  // Ranks are laid out node-major: rank r ran on the attempt's node
  // r / gpus_per_node.
  std::vector<std::string> nodes_by_rank(world);
  if (attempt == job->attempt) {
    for (const RankPlacement& p : job->allocation) nodes_by_rank[p.rank] = p.node;
  } else if (static_cast<size_t>(attempt) <= job->attempt_nodes.size() &&
             !job->attempt_nodes[attempt - 1].empty()) {
    const std::vector<std::string>& nodes = job->attempt_nodes[attempt - 1];
    for (int32_t r = 0; r < world; ++r) {
      nodes_by_rank[r] = nodes[std::min<size_t>(r / job->spec.gpus_per_node, nodes.size() - 1)];
    }
  } else {
    return absl::NotFoundError(absl::StrCat("attempt ", attempt, " of job ", job->id,
                                            " ran before placements were recorded"));
  }
  std::vector<LogTarget> out;
  for (int32_t r = 0; r < world; ++r) {
    if (rank >= 0 && r != rank) continue;
    LogTarget t{attempt, r, nodes_by_rank[r], ""};
    if (const NodeRecord* n = state_.FindNode(t.node)) t.agent_address = n->agent_address;
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<JobRecord> CoordinatorCore::PreemptJob(const std::string& id, Duration grace) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(JobRecord job, state_.PreemptJob(id, grace));
  RETURN_IF_ERROR(PersistLocked());
  return job;
}

absl::StatusOr<NodeView> CoordinatorCore::DrainNode(const std::string& name, Duration grace,
                                                    const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(NodeView node, state_.DrainNode(name, grace, reason));
  RETURN_IF_ERROR(PersistLocked());
  return node;
}

absl::StatusOr<NodeView> CoordinatorCore::UndrainNode(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(NodeView node, state_.UndrainNode(name));
  RETURN_IF_ERROR(PersistLocked());
  return node;
}

absl::StatusOr<std::vector<QuotaRow>> CoordinatorCore::SetQuota(const std::string& tenant,
                                                                int32_t gpus) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(state_.SetQuota(tenant, gpus));
  RETURN_IF_ERROR(PersistLocked());
  return state_.Quotas();
}

std::vector<QuotaRow> CoordinatorCore::Quotas() {
  absl::MutexLock lock(&mu_);
  return state_.Quotas();
}

std::vector<UsageRow> CoordinatorCore::Usage(const std::string& tenant, double since_unix) {
  absl::MutexLock lock(&mu_);
  return state_.Usage(tenant, since_unix);
}

absl::StatusOr<WhyResult> CoordinatorCore::Why(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return state_.Why(id);
}

absl::Status CoordinatorCore::ReportCheckpoint(const std::string& id, int64_t step,
                                               int64_t commit_unix) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(state_.ReportCheckpoint(id, step, commit_unix));
  return PersistLocked();
}

void CoordinatorCore::CheckpointLoop(Duration interval) {
  for (;;) {
    std::map<std::string, std::string> targets;
    {
      absl::MutexLock lock(&mu_);
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::FromChrono(interval))) return;
      targets = state_.CheckpointTargets();
    }
    for (const auto& [id, uri] : targets) {  // storage I/O without the lock
      absl::StatusOr<std::unique_ptr<ObjectStore>> store = OpenObjectStore(uri);
      if (!store.ok()) continue;
      absl::StatusOr<std::vector<CommittedStep>> steps = ListCommitted(store->get(), id);
      if (!steps.ok() || steps->empty()) continue;
      ReportCheckpoint(id, steps->back().step, steps->back().commit_unix).IgnoreError();
    }
  }
}

}  // namespace athanor::coord
