// One scheduling pass: order, quota, placement, head preemption/reservation,
// backfill. See scheduler.h for the policy.
#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "coordinator/scheduler/placement.h"
#include "coordinator/scheduler/preemption.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::sched {

namespace {

int64_t Micros(Duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

}  // namespace

// Free resources only shrink during a pass (starts take, preemptions free
// nothing until exit), so a shape that failed stays failed: cache it.
struct Scheduler::PassState {
  TimePoint now;
  bool head_found = false;
  JobId head;
  bool strict_blocked = false;
  std::optional<Reservation> reservation;
  std::vector<JobId> started;
  size_t visited = 0;  // pending jobs looked at
  std::map<ShapeKey, int> failed_uncapped;  // -> eligible node count
  std::map<ShapeKey, int> failed_capped;

  // Places with the failure cache; nullopt when the shape is known to fail.
  PlacementResult Place(const Membership& members, const JobRequest& job, const NodeCaps* caps) {
    auto& cache = caps == nullptr ? failed_uncapped : failed_capped;
    ShapeKey key = ShapeOf(job);
    auto it = cache.find(key);
    if (it != cache.end()) return PlacementResult{{}, it->second};
    PlacementResult result = PlaceLive(members, job, caps);
    if (!result.ok()) cache[key] = result.eligible;
    return result;
  }
};

std::vector<Decision> Scheduler::Schedule() {
  PassState pass;
  pass.now = clock_->Now();
  ++pass_id_;
  std::vector<Decision> out;
  // A shape that failed without caps cannot start any job this pass (free
  // resources only shrink): its jobs are skipped unvisited, and Why() works
  // their reason out when asked. Strict order stops the pass at the head.
  auto dead = [&pass](const ShapeKey& shape) { return pass.failed_uncapped.count(shape) > 0; };
  for (const auto& [priority, tenants] : queue_.classes()) {
    struct ShapeCursor {
      const ShapeKey* shape;
      JobQueue::ShapeQueue::const_iterator it, end;
    };
    struct Cursor {
      const std::string* tenant;
      std::vector<ShapeCursor> shapes;
      double share;
      ShapeCursor* front = nullptr;  // the tenant's oldest live job
    };
    std::vector<Cursor> cursors;
    for (const auto& [tenant, shapes] : tenants) {
      Cursor c{&tenant, {}, TenantShare(tenant)};
      for (const auto& [shape, queue] : shapes) c.shapes.push_back({&shape, queue.begin(), queue.end()});
      cursors.push_back(std::move(c));
    }
    while (!pass.strict_blocked) {
      // The tenant furthest below its share goes next; FIFO breaks ties.
      Cursor* next = nullptr;
      double next_ratio = 0;
      for (Cursor& c : cursors) {
        c.front = nullptr;
        for (ShapeCursor& sc : c.shapes) {
          if (sc.it == sc.end || dead(*sc.shape)) continue;
          if (c.front == nullptr || sc.it->first < c.front->it->first) c.front = &sc;
        }
        if (c.front == nullptr) continue;
        double ratio = accounting_.GpusInUse(*c.tenant) / c.share;
        if (next == nullptr || ratio < next_ratio ||
            (ratio == next_ratio && c.front->it->first < next->front->it->first)) {
          next = &c, next_ratio = ratio;
        }
      }
      if (next == nullptr) break;
      JobRecord& job = jobs_.at(next->front->it->second);
      ++next->front->it;
      job.reason.pass = pass_id_;
      ++pass.visited;

      if (!job.hold.empty()) {
        job.reason.Set(PendingReason::Code::kHeld);
        continue;
      }
      const int quota = TenantQuota(job.req.tenant);
      const int in_use = accounting_.GpusInUse(job.req.tenant);
      if (quota >= 0 && in_use + job.req.total_gpus() > quota) {
        job.reason.Set(PendingReason::Code::kQuota);
        job.reason.gpus_in_use = in_use;
        job.reason.quota = quota;
        continue;
      }
      if (pass.head_found) {
        TryBackfill(job, pass, out);
        continue;
      }
      PlacementResult placed = pass.Place(membership_, job.req, nullptr);
      if (placed.ok()) {
        StartJob(job, placed.nodes, pass, out);
      } else {
        HandleHead(job, placed.eligible, pass, out);
      }
    }
  }
  for (const JobId& id : pass.started) queue_.Remove(jobs_.at(id).req);
  last_pass_.reservation = std::move(pass.reservation);
  last_pass_.head = pass.head;
  last_pass_.strict_blocked = pass.strict_blocked;
  last_pass_.visited = pass.visited;
  return out;
}

void Scheduler::StartJob(JobRecord& job, const std::vector<int>& nodes, PassState& pass,
                         std::vector<Decision>& out) {
  Decision decision;
  decision.kind = Decision::Kind::kStart;
  decision.job = job.req.id;
  for (int node : nodes) {
    decision.placement.push_back(membership_.Allocate(node, job.req.id, job.req.gpus_per_node,
                                                      job.req.cpus_per_node,
                                                      job.req.memory_mb_per_node));
  }
  job.state = JobState::kRunning;
  job.nodes = nodes;
  holders_[job.req.id] = &job;
  job.started = pass.now;
  IndexEnd(job);
  job.borrower = false;
  job.reason.Set(PendingReason::Code::kNotConsidered);
  accounting_.Start(job.req.id, job.req.tenant, job.req.total_gpus(), pass.now);
  pass.started.push_back(job.req.id);
  out.push_back(std::move(decision));
}

void Scheduler::HandleHead(JobRecord& job, int eligible_free, PassState& pass,
                           std::vector<Decision>& out) {
  const JobRequest& req = job.req;
  const Resources need = PerNodeNeed(req);
  int hosts = 0;
  std::vector<Resources> base(membership_.size());
  std::vector<char> fits(membership_.size());  // UpAndStaticallyFits, per node
  int base_fits = 0;
  for (int i = 0; i < membership_.size(); ++i) {
    base[i] = FreeOf(membership_.node(i));
    fits[i] = UpAndStaticallyFits(membership_, i, req);
    hosts += fits[i];
  }
  job.reason.Set(PendingReason::Code::kNotConsidered);
  if (hosts < req.nodes) {  // not even an empty cluster of UP nodes would do
    job.reason.code = PendingReason::Code::kNoFitNow;
    job.reason.eligible = hosts;
    return;
  }
  pass.head_found = true;
  pass.head = req.id;
  pass.strict_blocked = !options_.backfill;

  // GPUs of PREEMPTING jobs are as good as free for deciding what to preempt.
  std::vector<const JobRecord*> holders;
  holders.reserve(holders_.size());
  for (const auto& [id, holder] : holders_) holders.push_back(holder);
  std::vector<JobId> preempting;
  for (const JobRecord* holder : holders) {
    if (holder->state != JobState::kPreempting) continue;
    bool useful = false;
    for (int node : holder->nodes) {
      base[node] += HoldOf(membership_.node(node).holds.at(holder->req.id));
      useful = useful || fits[node];
    }
    if (useful) preempting.push_back(holder->req.id);
  }
  for (int i = 0; i < membership_.size(); ++i) {
    if (fits[i] && base[i].Covers(need)) ++base_fits;
  }
  std::vector<JobId> victims;
  if (base_fits < req.nodes) {
    std::vector<PreemptionCandidate> candidates;
    for (const JobRecord* holder : holders) {
      const JobRecord& h = *holder;
      if (h.state != JobState::kRunning || !h.req.preemptible) continue;
      bool lower = h.req.priority < req.priority && pass.now - h.started >= options_.min_run_time;
      bool borrowed = h.borrower && h.req.priority <= req.priority;
      if (!lower && !borrowed) continue;
      PreemptionCandidate c;
      c.job = h.req.id;
      c.gpus = h.req.total_gpus();
      TimePoint since = h.started;
      if (h.last_checkpoint && *h.last_checkpoint > since) since = *h.last_checkpoint;
      c.lost_gpu_us = std::max<int64_t>(0, Micros(pass.now - since)) * c.gpus;
      for (int node : h.nodes) {
        c.holds.emplace_back(node, HoldOf(membership_.node(node).holds.at(h.req.id)));
      }
      candidates.push_back(std::move(c));
    }
    if (auto plan = PlanPreemption(membership_, req, base, std::move(candidates),
                                   options_.exact_preemption_limit)) {
      for (const JobId& id : plan->victims) {
        JobRecord& victim = jobs_.at(id);
        victim.state = JobState::kPreempting;
        victim.preempt_deadline = pass.now + victim.req.grace;
        IndexEnd(victim);
        Decision decision;
        decision.kind = Decision::Kind::kPreempt;
        decision.job = id;
        decision.grace = victim.req.grace;
        out.push_back(std::move(decision));
        victims.push_back(id);
      }
    }
  } else {
    victims = preempting;
  }
  // Victims were re-indexed above: their ends are now their deadlines.
  pass.reservation = ComputeReservation(membership_, job, ends_, fits, pass.now);
  if (!victims.empty() && (base_fits >= req.nodes || pass.reservation)) {
    std::sort(victims.begin(), victims.end());
    job.reason.code = PendingReason::Code::kWaitingPreemption;
    job.reason.victims = victims;
  } else {
    job.reason.code = PendingReason::Code::kHoldsReservation;
    job.reason.eligible = eligible_free;
  }
  if (pass.reservation) {
    job.reason.finite = pass.reservation->finite;
    job.reason.when = pass.reservation->start;
  }
}

void Scheduler::TryBackfill(JobRecord& job, PassState& pass, std::vector<Decision>& out) {
  const JobRequest& req = job.req;
  job.reason.Set(PendingReason::Code::kNotConsidered);
  if (!pass.reservation) {  // defensive: the head had no reservation
    PlacementResult placed = pass.Place(membership_, req, nullptr);
    if (placed.ok()) return StartJob(job, placed.nodes, pass, out);
    job.reason.code = PendingReason::Code::kNoFree;
    job.reason.eligible = placed.eligible;
    return;
  }
  Reservation& reservation = *pass.reservation;
  job.reason.finite = reservation.finite;
  job.reason.when = reservation.start;
  const bool ends_before = reservation.EndsBefore(pass.now, req.time_limit);
  PlacementResult placed = pass.Place(membership_, req, ends_before ? nullptr : &reservation.slack);
  bool borrow = false;
  if (!placed.ok() && !ends_before && req.preemptible && req.priority <= reservation.priority) {
    placed = pass.Place(membership_, req, nullptr);
    borrow = placed.ok();
  }
  if (placed.ok()) {
    if (!ends_before) {
      for (int node : placed.nodes) ConsumeSlack(reservation, node, PerNodeNeed(req));
    }
    StartJob(job, placed.nodes, pass, out);
    job.borrower = borrow;
    return;
  }
  PlacementResult uncapped = ends_before ? placed : pass.Place(membership_, req, nullptr);
  if (uncapped.ok()) {
    // It would fit, but only on GPUs the head needs: do not start it. The
    // placement above did not allocate anything.
    job.reason.code = PendingReason::Code::kBehindReservation;
  } else {
    job.reason.code = PendingReason::Code::kNoFree;
    job.reason.eligible = uncapped.eligible;
  }
}

}  // namespace athanor::sched
