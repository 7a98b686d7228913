#include "coordinator/core/cluster_state.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/health/heartbeat_pace.h"

namespace athanor::coord {
namespace {

sched::SchedulerOptions SchedOptions(const StateOptions& o) {
  sched::SchedulerOptions s;
  s.backfill = o.backfill;
  s.policy = o.scheduling_policy;
  s.default_grace = o.default_grace;
  s.min_run_time = o.min_run_time;
  s.age_limit = o.age_limit;
  s.keep_head = o.keep_head;
  s.strict_fair_share = o.strict_fair_share;
  s.las.recall_after = o.las_recall_after;
  return s;
}

std::string Shorten(const std::string& s) { return s.size() <= 64 ? s : s.substr(0, 64) + "..."; }

}  // namespace

ClusterState::ClusterState(StateOptions options, const Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      // Generations keep growing across restarts: start at now, in ms.
      log_(static_cast<uint64_t>(clock->UnixSeconds()) * 1000),
      sched_(clock, SchedOptions(options_)),
      nodes_(&sched_, &log_, &clock_),
      accounts_(&options_, &sched_, &log_, &clock_),
      billing_(&options_, &log_, &clock_, &nodes_),
      owed_stores_(options_.volume_store_wait),
      launcher_(&options_, &nodes_, &log_, &clock_),
      jobs_({&options_, &clock_, &sched_, &nodes_, &log_, &launcher_, &accounts_, &billing_, &owed_stores_}),
      hangs_(options_.hangs, clock),
      suspects_(&options_.hangs, clock),
      upload_holds_(options_.checkpoint_upload_wait, &sched_,
                    [this](const std::string& id) { return jobs_.Find(id); }, &clock_) {}

void ClusterState::Restore(std::vector<JobRecord> jobs, const std::vector<NodeRecord>& nodes,
                           const std::map<std::string, int32_t>& quotas) {
  accounts_.RestoreQuotas(quotas);
  nodes_.Restore(nodes);
  jobs_.Restore(std::move(jobs));
}

absl::StatusOr<SubmitResult> ClusterState::SubmitJob(const JobSpec& spec, const std::string& key,
                                                     int32_t max_pending) {
  // The image resolves now, under the same lock as the submission: the job
  // runs exactly this digest whatever later happens to the name.
  std::string image_digest;
  if (!spec.image.empty()) {
    ASSIGN_OR_RETURN(image_digest, images().ResolveDigest(spec.tenant, spec.image));
  }
  RETURN_IF_ERROR(volumes().CheckSubmit(spec, key));  // under the same lock, too
  RETURN_IF_ERROR(snapshots().CheckSubmit(spec));
  ASSIGN_OR_RETURN(SubmitResult r, jobs_.Submit(spec, key, max_pending, image_digest));
  if (!r.duplicate) ScheduleInline();
  return r;
}

absl::StatusOr<JobRecord> ClusterState::CancelJob(const std::string& id) {
  ASSIGN_OR_RETURN(JobRecord job, jobs_.Cancel(id));
  ScheduleInline();
  return jobs_.Find(id) != nullptr ? *jobs_.Find(id) : job;
}

void ClusterState::Tick() {
  Duration timeout = options_.heartbeat_timeout;
  if (options_.heartbeat_pace != nullptr) {
    options_.heartbeat_pace->SetNodes(sched_.view().membership().registered());
    timeout = options_.heartbeat_pace->Timeout();
    hangs_.SetMinWindow(2 * options_.heartbeat_pace->Interval());  // >= 2 samples a rank
  }
  for (const auto& [name, why] : nodes_.Expire(timeout)) {
    jobs_.FailAttemptsOn(name, absl::StrCat("node ", name, " went DOWN (", why, ")"));
    volumes().NodeLost(name, "it went DOWN");
  }
  jobs_.SettleAll();
  for (int64_t seq : std::set<int64_t>(jobs_.active())) {
    JobRecord* job = jobs_.Mutable(std::to_string(seq));
    if (job == nullptr) continue;
    if (std::optional<std::string> reclaim = accounts_.CheckIdle(job)) {
      // Its work folders and volumes are kept for a restore (cluster_snapshots.h).
      if (job->allocated && !job->allocation.empty()) {
        if (absl::Status s = snapshots().Take(*job, *reclaim).status(); !s.ok()) {
          ATHANOR_LOG(WARNING) << "job " << job->id << ": no snapshot: " << s;
        }
      }
      jobs_.BeginStop(job, JobState::kCancelled, *reclaim);
    }
  }
  CheckHangs();
  billing().Enforce();
  Schedule();
}

size_t ClusterState::Schedule() {
  upload_holds_.Refresh(volumes().Holds());
  std::vector<sched::Decision> decisions = sched_.Schedule();
  for (const sched::Decision& d : decisions) {
    if (d.kind == sched::Decision::Kind::kStart) {
      jobs_.StartAttempt(d.job, d.placement);
    } else if (JobRecord* job = jobs_.Mutable(d.job)) {
      jobs_.BeginPreempt(job, d.grace, PreemptCause::kPriority, kPriorityPreemption);
    } else {
      ATHANOR_LOG(ERROR) << "scheduler preempted unknown job " << d.job;
    }
  }
  return decisions.size();
}

absl::StatusOr<WhyResult> ClusterState::Why(const std::string& id) const {
  const JobRecord* job = jobs_.Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
  WhyResult out;
  out.state = job->state;
  if (job->state == JobState::kPending) {
    if (absl::StatusOr<sched::WhyReport> r = sched_.view().Why(job->id); r.ok()) {
      out.reasons = r->reasons;
      out.queue_position = r->queue_position;
    }
    if (job->reason.rfind("requeued", 0) == 0) out.reasons.push_back(job->reason);
  } else if (job->stopping) {
    out.reasons.push_back(absl::StrCat("stopping: ", job->stop_reason));
    if (job->preempted) {
      out.reasons.push_back(
          absl::StrCat("ranks are SIGKILLed at ", FormatUnix(job->preempt_deadline_unix)));
    }
  } else if (job->allocated) {
    std::string where;
    for (size_t i = 0; i < job->allocation.size(); ++i) {
      if (i > 0 && job->allocation[i].node == job->allocation[i - 1].node) continue;
      absl::StrAppend(&where, where.empty() ? "" : ",", job->allocation[i].node);
    }
    out.reasons.push_back(absl::StrCat(JobStateName(job->state), " on ", where, " (attempt ",
                                       job->attempt, ")"));
    if (!job->reason.empty()) out.reasons.push_back(job->reason);
  } else {
    out.reasons.push_back(job->reason.empty() ? JobStateName(job->state) : job->reason);
  }
  return out;
}

Changes ClusterState::TakeChanges(std::set<std::string>* touched_nodes) {
  ChangeLog::Marks marks = log_.Take();
  Changes c;
  for (int64_t seq : marks.jobs) {
    JobRecord* job = jobs_.Mutable(std::to_string(seq));
    if (job == nullptr) continue;
    // The scheduler's marks go with the record: they change only with
    // something that marks the job (a requeue, a start, a preemption).
    const sched::QueuedJob* queued = sched_.view().job(job->id);
    const sched::QueueMarks m = queued != nullptr ? queued->marks() : sched::QueueMarks{};
    job->queued_at_unix = m.queued_at ? clock_.ToUnix(*m.queued_at) : 0;
    job->order_preemptions = m.order_preemptions;
    job->las_behind_seq = static_cast<int64_t>(m.las_behind_seq);
    job->las_recalls = m.las_recalls;
    c.jobs.push_back(*job);
  }
  for (const std::string& n : marks.nodes) {
    if (std::optional<NodeRecord> rec = nodes_.Get(n)) c.nodes.push_back(std::move(*rec));
  }
  c.quotas = std::move(marks.quotas);
  c.prices = std::move(marks.prices);
  c.plans = std::move(marks.plans);
  c.ledger = std::move(marks.ledger);
  c.volumes = std::move(marks.volumes);
  c.snapshots = std::move(marks.snapshots);
  c.images = std::move(marks.images);
  if (touched_nodes != nullptr) *touched_nodes = std::move(marks.touched);
  return c;
}

std::vector<JobRecord> ListJobs(const JobLifecycle& jobs, bool include_finished) {
  std::vector<JobRecord> out;
  for (const auto& [seq, job] : jobs.all()) {
    if (include_finished || !IsTerminal(job.state)) out.push_back(job);
  }
  return out;
}

}  // namespace athanor::coord
