// "why JOB": human reasons for a job's state, from the last pass.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/scheduler/why.h"

#include "coordinator/scheduler/placement.h"

namespace athanor::sched {

std::string DescribeNeed(const JobRequest& job) {
  std::string need = absl::StrCat("needs ", job.elastic() ? absl::StrCat(job.min_nodes, " to ") : "", job.nodes,
                                  job.nodes == 1 ? " node" : " nodes",
                                  " with ", job.gpus_per_node, " free GPU",
                                  job.gpus_per_node == 1 ? "" : "s");
  std::vector<std::string> extras;
  if (!job.gpu_model.empty()) extras.push_back(absl::StrCat("model ", job.gpu_model));
  if (job.min_gpu_memory_mb > 0) {
    extras.push_back(absl::StrCat(">= ", job.min_gpu_memory_mb, " MB per GPU"));
  }
  if (job.cpus_per_node > 0) extras.push_back(absl::StrCat(job.cpus_per_node, " CPUs"));
  if (job.memory_mb_per_node > 0) extras.push_back(absl::StrCat(job.memory_mb_per_node, " MB RAM"));
  if (!extras.empty()) absl::StrAppend(&need, " (", absl::StrJoin(extras, ", "), ")");
  absl::StrAppend(&need, job.nodes == 1 ? "" : " each");
  return need;
}

namespace {

std::string StartText(bool finite, TimePoint when, TimePoint now) {
  if (!finite) return "at an unknown time (running jobs declare no time limit)";
  int64_t s = std::chrono::duration_cast<std::chrono::seconds>(when - now).count();
  return absl::StrCat("in ", s, " s");
}

// The reason of a pending job the last pass skipped, worked out now.
PendingReason ReasonNow(const SchedulerState& s, const QueuedJob& job) {
  PendingReason r;
  r.pass = s.pass_id;
  if (!s.HoldOf(job).empty()) {
    r.code = PendingReason::Code::kHeld;
    return r;
  }
  const int quota = s.TenantQuota(job.req.tenant);
  const int in_use = s.accounting.GpusInUse(job.req.tenant);
  if (quota >= 0 && in_use + job.req.least_nodes() * job.req.gpus_per_node > quota) {
    r.code = PendingReason::Code::kQuota;
    r.gpus_in_use = in_use;
    r.quota = quota;
    return r;
  }
  if (s.pass_id == 0) return r;  // kNotConsidered
  if (s.last_pass.strict_blocked) {
    r.code = PendingReason::Code::kStrictOrder;
    return r;
  }
  const int hosts = CountUpAndStaticallyFit(s.membership, job.req);
  if (hosts < job.req.least_nodes()) {
    r.code = PendingReason::Code::kNoFitNow;
    r.eligible = hosts;
    return r;
  }
  JobRequest least = job.req;
  least.nodes = job.req.least_nodes();
  least.min_nodes = 0;
  PlacementResult placed = PlaceLive(s.membership, least, nullptr);
  if (placed.ok() && s.last_pass.reservation) {
    // It fits what is free, but the pass skipped its shape: it could start
    // only on what the head's reservation holds.
    r.code = PendingReason::Code::kBehindReservation;
    r.finite = s.last_pass.reservation->finite;
    r.when = s.last_pass.reservation->start;
    return r;
  }
  r.code = placed.ok() ? PendingReason::Code::kNotConsidered : PendingReason::Code::kNoFree;
  r.eligible = placed.eligible;
  return r;
}

}  // namespace

WhyReport Explain(const SchedulerState& s, const QueuedJob& job, TimePoint now) {
  WhyReport report;
  report.state = job.state;
  if (job.state != QueuedJobState::kPending) {
    std::vector<std::string> nodes;
    for (int node : job.nodes) nodes.push_back(s.membership.node(node).spec.name);
    report.reasons.push_back(absl::StrCat(QueuedJobStateName(job.state), " on ",
                                          absl::StrJoin(nodes, ",")));
    return report;
  }
  const PendingReason r = job.reason.pass == s.pass_id ? job.reason : ReasonNow(s, job);
  using Code = PendingReason::Code;
  switch (r.code) {
    case Code::kNotConsidered:
      report.reasons.push_back("not yet considered by a scheduling pass");
      break;
    case Code::kQuota:
      report.reasons.push_back(absl::StrCat("quota: tenant ", job.req.tenant, " uses ",
                                            r.gpus_in_use, " of ", r.quota, " GPUs; the job needs ",
                                            job.req.least_nodes() * job.req.gpus_per_node));
      break;
    case Code::kNoFitNow:
      report.reasons.push_back(absl::StrCat("no node fits: ", DescribeNeed(job.req), "; only ",
                                            r.eligible, " UP node(s) could ever host a share"));
      break;
    case Code::kNoFree:
      report.reasons.push_back(absl::StrCat("no node fits: ", DescribeNeed(job.req), "; ",
                                            r.eligible, r.eligible == 1 ? " node has" : " nodes have",
                                            " them free"));
      break;
    case Code::kHoldsReservation:
      report.reasons.push_back(absl::StrCat("no node fits: ", DescribeNeed(job.req), "; ",
                                            r.eligible, r.eligible == 1 ? " node has" : " nodes have",
                                            " them free"));
      report.reasons.push_back(absl::StrCat("holds the reservation; starts ",
                                            StartText(r.finite, r.when, now)));
      break;
    case Code::kWaitingPreemption:
      report.reasons.push_back(absl::StrCat("waiting for preempted job(s) ",
                                            absl::StrJoin(r.victims, ", "), " to exit"));
      break;
    case Code::kBehindReservation:
      report.reasons.push_back(absl::StrCat("waiting behind the reservation for job ", s.last_pass.head,
                                            " (starts ", StartText(r.finite, r.when, now), ")"));
      break;
    case Code::kHeld:
      report.reasons.push_back(s.HoldOf(job));
      break;
    case Code::kStrictOrder:
      report.reasons.push_back(
          absl::StrCat("waiting behind blocked job ", s.last_pass.head, " (backfill is off)"));
      break;
  }
  if (!job.req.avoid_nodes.empty()) {
    report.reasons.push_back(absl::StrCat("avoids node(s) ", absl::StrJoin(job.req.avoid_nodes, ", "),
                                          " (moved off a straggler)"));
  }
  report.queue_position = s.queue.Position(job.req);
  report.reasons.push_back(absl::StrCat("position ", report.queue_position, " of ", s.queue.size(),
                                        " in the queue"));
  return report;
}

}  // namespace athanor::sched
