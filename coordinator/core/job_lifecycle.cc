#include "coordinator/core/job_lifecycle.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "coordinator/core/attempt_spans.h"
#include "coordinator/core/elastic_resize.h"
#include "coordinator/core/job_network.h"
#include "coordinator/core/notebook_command.h"
#include "coordinator/health/oom_advice.h"
#include "coordinator/health/rank_reports.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

std::string Shorten(const std::string& s) { return s.size() <= 64 ? s : s.substr(0, 64) + "..."; }

absl::Status NoJob(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no job '", Shorten(id), "'"));
}

}  // namespace

JobRecord* JobLifecycle::Mutable(const std::string& id) {
  int64_t seq = 0;
  if (!absl::SimpleAtoi(id, &seq)) return nullptr;
  auto it = jobs_.find(seq);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobRecord* JobLifecycle::Find(const std::string& id) const {
  return const_cast<JobLifecycle*>(this)->Mutable(id);
}

void JobLifecycle::Restore(std::vector<JobRecord> jobs) {
  for (JobRecord& j : jobs) {
    next_seq_ = std::max(next_seq_, j.seq + 1);
    if (!j.idempotency_key.empty()) by_key_[{j.spec.tenant, j.idempotency_key}] = j.seq;
    jobs_[j.seq] = std::move(j);
  }
  for (auto& [seq, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    absl::Status s;
    sched::QueueMarks marks;
    if (job.queued_at_unix > 0) marks.queued_at = p_.clock->FromUnix(job.queued_at_unix);
    marks.order_preemptions = job.order_preemptions;
    marks.las_behind_seq = static_cast<uint64_t>(job.las_behind_seq);
    marks.las_recalls = job.las_recalls;
    if (job.allocated) {
      active_.insert(seq);
      p_.launcher->Restore(job);
      std::optional<TimePoint> ckpt, deadline;
      if (job.last_checkpoint_unix > 0) ckpt = p_.clock->FromUnix(job.last_checkpoint_unix);
      if (job.stopping && job.preempted) deadline = p_.clock->FromUnix(job.preempt_deadline_unix);
      // The attempt's span starts at its placement to the microsecond;
      // start_time_unix is whole seconds and would age the attempt by up to
      // 1 s against the minimum run time.
      double started = static_cast<double>(job.start_time_unix);
      if (!job.attempt_spans.empty() && job.attempt_spans.back().start > 0) {
        started = job.attempt_spans.back().start;
      }
      s = p_.sched->Restore(ToSchedRequest(job, *p_.options), ToSchedPlacement(job),
                            p_.clock->FromUnix(started), ckpt, deadline, marks);
      if (s.ok() && job.stopping) PublishStop(job);
    } else {
      s = p_.sched->Submit(ToSchedRequest(job, *p_.options), marks);
    }
    if (!s.ok()) {
      ATHANOR_LOG(ERROR) << "restore job " << job.id << " into the scheduler: " << s;
      if (!job.allocated) Finish(&job, JobState::kFailed, absl::StrCat("after a restart: ", s.message()));
    }
  }
}

absl::StatusOr<SubmitResult> JobLifecycle::Submit(const JobSpec& spec, const std::string& key,
                                                  int32_t max_pending, const std::string& image_digest) {
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  RETURN_IF_ERROR(ValidateIdempotencyKey(key));
  const Duration floor = p_.options->hangs.timeout_floor;
  if (spec.hang_timeout_s > 0 && Seconds(static_cast<double>(spec.hang_timeout_s)) < floor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hang_timeout_s: ", spec.hang_timeout_s, " s is below the coordinator's floor of ",
        ToSeconds(floor), " s (--hang-timeout-floor-s); ask for at least that, or 0 for the default"));
  }
  if (!p_.options->job_network.empty() && spec.nodes > kMaxJobNetworkNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nodes: ", spec.nodes, " nodes is more than a job network holds (each attempt gets a /24 of "
        "--job-network, one address per node): at most ", kMaxJobNetworkNodes));
  }
  if (!key.empty()) {
    auto it = by_key_.find({spec.tenant, key});
    if (it != by_key_.end()) return SubmitResult{jobs_.at(it->second).id, true};
  }
  if (max_pending > 0 && p_.sched->view().pending_of(spec.tenant) >= static_cast<size_t>(max_pending)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", spec.tenant, "' has ", p_.sched->view().pending_of(spec.tenant),
        " pending jobs, the most it may queue (", max_pending,
        ", --max-pending-per-tenant): wait for some to start, or cancel some"));
  }
  JobRecord job;
  job.seq = next_seq_;
  job.id = std::to_string(job.seq);
  job.spec = spec;
  if (spec.notebook) job.spec.command = NotebookCommand(job.id);  // replaces any given
  job.image_digest = image_digest;
  job.idempotency_key = key;
  job.state = JobState::kPending;
  job.submit_time_unix = p_.clock->UnixSeconds();
  job.reason = "waiting for placement";
  if (absl::Status s = p_.sched->Submit(ToSchedRequest(job, *p_.options)); !s.ok()) {
    std::string msg(s.message());
    // "job N can never fit: ..." -> "job can never fit: ..." (no id was given out).
    std::string prefix = absl::StrCat("job ", job.id, " ");
    if (msg.rfind(prefix, 0) == 0) msg = "job " + msg.substr(prefix.size());
    return absl::Status(s.code(), msg);
  }
  ++next_seq_;
  Mark(job);
  if (!key.empty()) by_key_[{spec.tenant, key}] = job.seq;
  SubmitResult result{job.id, false};
  jobs_[job.seq] = std::move(job);
  return result;
}

absl::StatusOr<JobRecord> JobLifecycle::Cancel(const std::string& id) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) return NoJob(id);
  if (IsTerminal(job->state)) return *job;
  if (!job->allocated) {
    // NotFound: the scheduler already forgot it; the record still ends.
    if (absl::Status s = p_.sched->Cancel(job->id); !s.ok() && !absl::IsNotFound(s)) return s;
    Finish(job, JobState::kCancelled, "cancelled by user");
  } else if (job->stopping) {
    job->stop_outcome = JobState::kCancelled;
    job->stop_reason = "cancelled by user";
    Mark(*job);
  } else {
    BeginStop(job, JobState::kCancelled, "cancelled by user");
  }
  return *job;
}

absl::StatusOr<JobRecord> JobLifecycle::Preempt(const std::string& id, Duration grace) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) return NoJob(id);
  if (!job->allocated || IsTerminal(job->state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, " is ", JobStateName(job->state), "; only running jobs can be preempted"));
  }
  if (job->stopping) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job->id, " is already stopping: ", job->stop_reason));
  }
  BeginPreempt(job, grace > Duration::zero() ? grace : GraceOf(*job, *p_.options),
               PreemptCause::kAdmin, kAdminPreemption);
  return *job;
}

absl::StatusOr<JobRecord> JobLifecycle::NoteActivity(const std::string& id, const std::string& signal,
                                                     const std::string& detail) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (!job->spec.interactive || job->state != JobState::kRunning || job->stopping) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is not a running interactive instance"));
  }
  p_.accounts->MarkActive(job, p_.clock->UnixNow(), signal, detail);
  Mark(*job);
  return *job;
}

absl::Status JobLifecycle::ReportCheckpoint(const std::string& id, int64_t step,
                                            int64_t commit_unix) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) return NoJob(id);
  if (step < 0) return absl::InvalidArgumentError("step: must be >= 0");
  if (step <= job->committed_step) return absl::OkStatus();
  CreditLateCheckpoint(job, std::exchange(job->committed_step, step));
  job->last_checkpoint_unix =
      commit_unix > 0 ? static_cast<double>(commit_unix) : p_.clock->UnixNow();
  Mark(*job);
  if (job->allocated) {
    RETURN_IF_ERROR(p_.sched->OnCheckpoint(job->id, p_.clock->FromUnix(job->last_checkpoint_unix)));
    if (std::optional<std::string> why = GrowthAtCheckpoint(*job, *p_.sched)) {
      BeginResize(job, std::chrono::milliseconds(p_.options->kill_after_ms), PreemptCause::kGrow, *why);
    }
  }
  return absl::OkStatus();
}

void JobLifecycle::BeginResize(JobRecord* job, Duration grace, PreemptCause cause, const std::string& reason) {
  if (job->stopping || !job->allocated) return;
  job->stop_resize = cause == PreemptCause::kGrow ? "grown" : "shrunk";
  BeginPreempt(job, grace, cause, reason);
}



void JobLifecycle::ApplyReports(const std::vector<RankReport>& reports) {
  std::set<int64_t> touched;
  for (const RankReport& r : reports) {
    JobRecord* job = Mutable(r.job_id);
    if (job == nullptr || job->attempt != r.attempt || !job->allocated) continue;
    if (r.rank < 0 || r.rank >= static_cast<int32_t>(job->ranks.size())) continue;
    RankStatus& st = job->ranks[r.rank];
    if (st.exited) continue;
    if (job->spec.interactive) p_.accounts->TrackUse(job, r);
    if (!ApplyRankReport(r, &st)) continue;
    if (r.phase == RankPhase::kFailedToStart) {
      ATHANOR_LOG(WARNING) << "job " << job->id << " rank " << r.rank
                           << " failed to start: " << r.message;
      if (r.master_port_taken && !job->stopping) RequeueForTakenPort(job, st);
    }
    if (job->stopping && st.signal != 0 && !r.signal_from_agent) BlameSignal(job, st);
    Mark(*job);
    touched.insert(job->seq);
  }
  for (int64_t seq : touched) Evaluate(&jobs_[seq]);
}

void JobLifecycle::Evaluate(JobRecord* job) {
  if (!job->allocated) return;  // its attempt ended while its reports were applied
  if (job->stopping) {
    TrySettle(job);
    return;
  }
  const AttemptVerdict verdict = JudgeAttempt(job->ranks);
  switch (verdict.kind) {
    case AttemptVerdict::Kind::kFailed:
      FailAttempt(job, RankFailure(job->allocation, *verdict.failed));
      if (verdict.failed->signal == 0 && job->stopping) blamed_exit_.insert(job->seq);
      break;
    case AttemptVerdict::Kind::kSucceeded:
      Finish(job, JobState::kSucceeded, "");
      break;
    case AttemptVerdict::Kind::kAllStarted:
      if (job->state != JobState::kStarting) break;
      job->state = JobState::kRunning;
      Mark(*job);
      break;
    case AttemptVerdict::Kind::kUnchanged:
      break;
  }
}

void JobLifecycle::BlameSignal(JobRecord* job, const RankStatus& st) {
  if (blamed_exit_.erase(job->seq) == 0) return;
  job->stop_reason = RankFailure(job->allocation, st);
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt
                    << ": the failure is put down to " << job->stop_reason;
  Mark(*job);
}

void JobLifecycle::RequeueForTakenPort(JobRecord* job, const RankStatus& st) {
  const std::string failure = RankFailure(job->allocation, st);
  const std::string& node = job->allocation[0].node;  // rank 0's, which binds the port
  if (job->allocation[st.rank].node != node) {
    // Only rank 0's node binds the port; any other's word on it is a plain failure.
    FailAttempt(job, failure);
    return;
  }
  if (job->master_port_taken_on.size() >= kMaxMasterPortRequeues) {
    FailAttempt(job, absl::StrCat(failure, " (the job was requeued ", kMaxMasterPortRequeues,
                                  " times already for a taken master port, the most without using a restart)"));
    return;
  }
  job->master_port_taken_on.push_back(node);
  BeginPreempt(job, std::chrono::milliseconds(p_.options->kill_after_ms), PreemptCause::kMasterPort,
               absl::StrCat("another process holds the master port on node ", node,
                            ": requeued with another port and rank 0 elsewhere where it can be, using no restart (",
                            job->master_port_taken_on.size(), " of ", kMaxMasterPortRequeues, "): ", failure));
}

void JobLifecycle::StartAttempt(const std::string& id,
                                const std::vector<sched::NodeAllocation>& placement) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) {
    ATHANOR_LOG(ERROR) << "scheduler started unknown job " << id;
    return;
  }
  p_.launcher->Start(job, placement);
  active_.insert(job->seq);
  if (job->attempt == 1) counters_.ObservePending(std::max(0.0, p_.clock->UnixNow() - job->submit_time_unix));
}

void JobLifecycle::BeginPreempt(JobRecord* job, Duration grace, PreemptCause cause,
                                const std::string& reason) {
  if (job->stopping || !job->allocated) return;
  job->preempted = true;
  // A caller may have said so already (a shrink for a lost node).
  job->stop_platform_fault = job->stop_platform_fault || cause == PreemptCause::kPriority ||
                             cause == PreemptCause::kMasterPort;
  if (cause == PreemptCause::kShrink || cause == PreemptCause::kGrow) {
    counters_.resizes[job->stop_resize]++;  // not a preemption to the tenant
  } else {
    counters_.preemptions[PreemptCauseName(cause)]++;
  }
  job->stop_kill_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(grace).count();
  job->preempt_deadline_unix = p_.clock->UnixNow() + ToSeconds(grace);
  job->state = JobState::kPreempting;
  // A job the scheduler itself chose is PREEMPTING there already.
  if (absl::Status s = p_.sched->MarkPreempting(job->id, p_.clock->Now() + grace); !s.ok()) {
    ATHANOR_LOG(ERROR) << "scheduler: preempt job " << job->id << ": " << s;
  }
  BeginStop(job, JobState::kPending, reason);
}

void JobLifecycle::FailAttempt(JobRecord* job, const std::string& reason) {
  bool requeue = job->restarts < job->spec.max_restarts;
  BeginStop(job, requeue ? JobState::kPending : JobState::kFailed, reason);
}

void JobLifecycle::PublishStop(const JobRecord& job) {
  TouchAttemptNodes(p_.log, job);
  std::map<std::string, uint64_t>& gens = stop_generation_[job.seq];
  for (const RankPlacement& p : job.allocation) gens[p.node] = p_.log->NodeGeneration(p.node);
}

void JobLifecycle::BeginStop(JobRecord* job, JobState outcome, const std::string& reason) {
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt << " stopping ("
                    << JobStateName(outcome) << "): " << reason;
  job->stopping = true;
  job->stop_outcome = outcome;
  job->stop_reason = reason;
  Mark(*job);
  PublishStop(*job);
  TrySettle(job);
}

void JobLifecycle::TrySettle(JobRecord* job) {
  if (!job->stopping) return;
  const std::map<std::string, uint64_t>& gens = stop_generation_[job->seq];
  for (const RankPlacement& p : job->allocation) {
    if (job->ranks[p.rank].exited) continue;
    auto g = gens.find(p.node);
    if (!p_.nodes->Settled(p.node, {job->id, job->attempt, p.rank}, g == gens.end() ? 0 : g->second)) {
      return;
    }
  }
  Finish(job, job->stop_outcome, job->stop_reason);
}

void JobLifecycle::SettleAll() {
  // Only stopping attempts can settle; Finish() erases from stop_generation_.
  std::vector<int64_t> stopping;
  stopping.reserve(stop_generation_.size());
  for (const auto& [seq, gens] : stop_generation_) stopping.push_back(seq);
  for (int64_t seq : stopping) TrySettle(&jobs_[seq]);
}

std::vector<JobRecord*> JobLifecycle::RunningOn(const std::string& node) {
  std::vector<JobRecord*> out;
  for (int64_t seq : active_) {
    JobRecord& job = jobs_[seq];
    if (!job.stopping && std::any_of(job.allocation.begin(), job.allocation.end(),
                                     [&](const RankPlacement& p) { return p.node == node; })) {
      out.push_back(&job);
    }
  }
  return out;
}

void JobLifecycle::ShrinkInsteadOfFailing(JobRecord* job, const std::string& node, const std::string& why) {
  if (!FailureBecomesShrink(*job, node, *p_.nodes)) return;
  job->stop_reason = absl::StrCat("shrunk: ", why, " (first: ", job->stop_reason, ")");
  ATHANOR_LOG(INFO) << "job " << job->id << " attempt " << job->attempt << " stopping (PENDING): "
                    << job->stop_reason;
  job->preempted = true;  // requeued using no restart
  job->stop_kill_after_ms = std::min<int64_t>(p_.options->kill_after_ms, kLostNodeKillAfter.count());
  job->stop_platform_fault = true;
  job->stop_resize = "shrunk";
  job->stop_outcome = JobState::kPending;
  counters_.resizes[job->stop_resize]++;
  Mark(*job);
}

void JobLifecycle::FailAttemptsOn(const std::string& node, const std::string& why) {
  for (int64_t seq : active_) ShrinkInsteadOfFailing(&jobs_[seq], node, why);
  for (JobRecord* job : RunningOn(node)) {
    job->stop_platform_fault = true;  // a node lost is the platform's doing
    if (ShrinksWithout(*job, node, *p_.nodes)) {
      const auto kill_after = std::min(std::chrono::milliseconds(p_.options->kill_after_ms), kLostNodeKillAfter);
      BeginResize(job, kill_after, PreemptCause::kShrink, absl::StrCat("shrunk: ", why));
    } else {
      FailAttempt(job, why);
    }
  }
}

void JobLifecycle::PreemptAttemptsOn(const std::string& node, Duration grace,
                                     const std::string& why) {
  for (JobRecord* job : RunningOn(node)) {
    const Duration g = grace > Duration::zero() ? grace : GraceOf(*job, *p_.options);
    if (ShrinksWithout(*job, node, *p_.nodes)) {
      BeginResize(job, g, PreemptCause::kShrink, absl::StrCat("shrunk: ", why));
    } else {
      BeginPreempt(job, g, PreemptCause::kDrain, why);
    }
  }
}

void JobLifecycle::Finish(JobRecord* job, JobState outcome, const std::string& reason) {
  const bool was_allocated = job->allocated;
  // The usage interval and the span end together, never before what billing
  // charged already (a restarted coordinator's clock may be a little behind).
  const double now = std::max(p_.clock->UnixNow(), p_.billing->MeteredUntil(*job));
  const bool platform_fault = job->stop_platform_fault;
  if (was_allocated) {
    TouchAttemptNodes(p_.log, *job);  // its ranks leave the desired sets
    if (!job->usage.empty() && job->usage.back().end == 0) job->usage.back().end = now;
    p_.billing->Release(*job, platform_fault);
    absl::Status s = p_.sched->OnJobExited(job->id, outcome == JobState::kPending);
    if (absl::IsNotFound(s) && outcome == JobState::kPending) {
      s = p_.sched->Submit(ToSchedRequest(*job, *p_.options));
    }
    if (!s.ok()) ATHANOR_LOG(ERROR) << "scheduler: job " << job->id << " exit: " << s;
    p_.launcher->Release(*job);
    std::vector<std::string> nodes;
    for (const RankPlacement& p : job->allocation) nodes.push_back(p.node);
    p_.nodes->Touched(nodes);  // a draining node may be DRAINED now
  }
  job->allocated = false;
  active_.erase(job->seq);
  stop_generation_.erase(job->seq);
  blamed_exit_.erase(job->seq);
  p_.accounts->Forget(job->seq);
  job->stopping = false;
  const bool preempted = job->preempted;
  const bool resized = outcome == JobState::kPending && !job->stop_resize.empty();
  if (was_allocated) EndAttemptSpan(job, outcome, preempted, platform_fault, reason, now);
  job->stop_resize.clear();
  job->preempted = false;
  job->stop_platform_fault = false;
  job->billing_notice.clear();
  job->idle_warned = false;
  job->last_active_unix = 0;
  if (was_allocated && p_.owed_stores != nullptr && !job->spec.volumes.empty()) {
    p_.owed_stores->AttemptEnded(*job, p_.clock->Now(),
                                 [this](const std::string& node) { return p_.nodes->IsDown(node); },
                                 outcome == JobState::kPending);
  }
  // An attempt that ended out of memory says what to try (oom_advice.h).
  if (was_allocated) job->advice = OomAdviceFor(*job);
  const std::string why = job->advice.empty() ? reason : absl::StrCat(reason, "; ", job->advice);
  if (outcome == JobState::kPending) {
    if (!preempted) job->restarts++;
    counters_.requeues[resized ? "resize" : preempted ? "preemption" : "failure"]++;
    job->state = JobState::kPending;
    job->reason = absl::StrCat(resized ? "resizing" : "requeued", " after attempt ", job->attempt, ": ", why);
  } else {
    job->state = outcome;
    job->reason = why;
    job->end_time_unix = p_.clock->UnixSeconds();
  }
  ATHANOR_LOG(INFO) << "job " << job->id << " -> " << JobStateName(job->state)
                    << (job->reason.empty() ? "" : ": ") << job->reason;
  Mark(*job);
}

absl::Status JobLifecycle::RecordTelemetry(const std::string& id, const TelemetryFigures& figures) {
  JobRecord* job = Mutable(id);
  if (job == nullptr) return NoJob(id);
  job->last_telemetry = figures;
  Mark(*job);
  return absl::OkStatus();
}

}  // namespace athanor::coord
