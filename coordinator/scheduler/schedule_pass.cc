#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "coordinator/scheduler/las.h"
#include "coordinator/scheduler/placement.h"
#include "coordinator/scheduler/preemption.h"
#include "coordinator/scheduler/schedule_pass.h"

namespace athanor::sched {

namespace {

int64_t Micros(Duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

}  // namespace

PlacementResult SchedulePass::Place(const JobRequest& job, const NodeCaps* caps) {
  auto& cache = caps == nullptr ? failed_uncapped_ : failed_capped_;
  ShapeKey key = ShapeOf(job);
  auto it = cache.find(key);
  if (it != cache.end()) return PlacementResult{{}, it->second};
  PlacementResult result = PlaceLive(s_.membership, job, caps);
  if (!result.ok()) cache[key] = result.eligible;
  return result;
}

std::vector<Decision> SchedulePass::Run() {
  ++s_.pass_id;
  VisitAged();
  VisitLastHead();
  if (options_.policy == SchedulingPolicy::kDefault) {
    RunFairShare();
  } else {
    RunOrdered();
  }
  for (const JobId& id : started_) {
    const QueuedJob& job = s_.jobs.at(id);
    s_.queue.Remove(job.req, job.queued_at);
  }
  s_.last_pass.reservation = std::move(reservation_);
  s_.last_pass.head = head_;
  s_.last_pass.strict_blocked = strict_blocked_;
  s_.last_pass.visited = visited_;
  return std::move(out_);
}

bool SchedulePass::Dead(const ShapeKey& shape) const {
  // A shape that failed without caps cannot start any job this pass (free
  // resources only shrink): its jobs are skipped unvisited, and Why() works
  // their reason out when asked.
  if (failed_uncapped_.count(shape) > 0) return true;
  // Nor can one that failed within the reservation's slack (which only
  // shrinks) when none of its jobs may place on everything free: none ends
  // before the reservation (the shortest declared limit does not) and none
  // may borrow (TryBackfill). Without this a pass would visit every such
  // job while the head waits, 100,000 of them in a long queue.
  if (!reservation_ || failed_capped_.count(shape) == 0) return false;
  const JobQueue::ShapeStats* stats = s_.queue.stats(shape);
  if (stats == nullptr) return false;
  if (!stats->limits.empty() && reservation_->EndsBefore(now_, *stats->limits.begin())) return false;
  return head_waits_preemption_ || stats->preemptible == 0;
}

bool SchedulePass::Aged(const QueuedJob& job) const {
  // Every job in the queue was pending as the pass began; queued_at stays
  // as it was when the pass starts one, so a started job still counts.
  return options_.policy != SchedulingPolicy::kFifo && options_.age_limit > Duration::zero() &&
         now_ - job.queued_at >= options_.age_limit;
}

void SchedulePass::VisitAged() {
  if (options_.policy == SchedulingPolicy::kFifo || options_.age_limit <= Duration::zero()) return;
  const TimePoint cutoff = now_ - options_.age_limit;
  for (const auto& [since, seq, id] : s_.queue.by_wait()) {
    if (since > cutoff || strict_blocked_) break;
    QueuedJob& job = s_.jobs.at(id);
    if (!Dead(ShapeOf(job.req))) Visit(job);
  }
}

void SchedulePass::VisitLastHead() {
  if (!options_.keep_head || !options_.strict_fair_share || options_.policy != SchedulingPolicy::kDefault ||
      head_found_) {
    return;
  }
  auto it = s_.jobs.find(s_.last_pass.head);
  if (it == s_.jobs.end()) return;
  QueuedJob& job = it->second;
  // An aged head was visited already; classes() is not empty while it pends.
  if (job.state != QueuedJobState::kPending || Aged(job) || Dead(ShapeOf(job.req)) ||
      job.req.priority < s_.queue.classes().begin()->first) {
    return;
  }
  Visit(job);
}

void SchedulePass::RunFairShare() {
  auto oldest = s_.queue.by_submit().begin();
  for (const auto& [priority, tenants] : s_.queue.classes()) {
    // Unless fair share is strict, the class's jobs start in submit order up
    // to the first that cannot start, the head, as under FIFO with backfill:
    // no job waits for GPUs behind newer ones. Fair share orders the jobs
    // behind the head, which start only where they cannot delay it.
    for (; !options_.strict_fair_share && oldest != s_.queue.by_submit().end() &&
           -std::get<0>(*oldest) == priority && !head_found_;
         ++oldest) {
      QueuedJob& job = s_.jobs.at(std::get<2>(*oldest));
      if (job.reason.pass != s_.pass_id && !Dead(ShapeOf(job.req))) Visit(job);
    }
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
      Cursor c{&tenant, {}, s_.TenantShare(tenant)};
      for (const auto& [shape, queue] : shapes) c.shapes.push_back({&shape, queue.begin(), queue.end()});
      cursors.push_back(std::move(c));
    }
    while (!strict_blocked_) {
      // The tenant furthest below its share goes next; FIFO breaks ties.
      Cursor* next = nullptr;
      double next_ratio = 0;
      for (Cursor& c : cursors) {
        c.front = nullptr;
        for (ShapeCursor& sc : c.shapes) {
          if (sc.it == sc.end || Dead(*sc.shape)) continue;
          if (c.front == nullptr || sc.it->first < c.front->it->first) c.front = &sc;
        }
        if (c.front == nullptr) continue;
        double ratio = s_.accounting.GpusInUse(*c.tenant) / c.share;
        if (next == nullptr || ratio < next_ratio ||
            (ratio == next_ratio && c.front->it->first < next->front->it->first)) {
          next = &c, next_ratio = ratio;
        }
      }
      if (next == nullptr) break;
      QueuedJob& job = s_.jobs.at(next->front->it->second);
      ++next->front->it;
      // Aged, kept and the oldest jobs were visited first.
      if (job.reason.pass != s_.pass_id) Visit(job);
    }
  }
}

void SchedulePass::RunOrdered() {
  // Sorting every pending job costs O(n log n) a pass, where the default
  // policy's cursors cost what they start; the order of these policies
  // crosses tenants and (for FIFO) classes, so the queue's layout cannot give
  // it directly.
  struct Entry {
    int class_rank;  // lower first: higher priority, or 0 for FIFO
    int las_queue;   // lower first
    uint64_t seq;
    bool behind;     // LAS: right behind the job of `seq` (QueuedJob::las_behind_seq)
    const JobId* id;
    const ShapeKey* shape;
    QueuedJob* job;
  };
  std::vector<Entry> order;
  order.reserve(s_.queue.size());
  const bool fifo = options_.policy == SchedulingPolicy::kFifo;
  for (const auto& [priority, tenants] : s_.queue.classes()) {
    for (const auto& [tenant, shapes] : tenants) {
      for (const auto& [shape, queue] : shapes) {
        for (const auto& [seq, id] : queue) {
          QueuedJob& job = s_.jobs.at(id);
          if (fifo) {
            order.push_back({0, 0, seq, false, &id, &shape, &job});
            continue;
          }
          if (Aged(job)) continue;  // visited first
          if (Recalling(job)) {  // ahead of its class's queues, oldest first
            order.push_back({-priority, -1, seq, false, &id, &shape, &job});
            continue;
          }
          const bool behind = job.las_behind_seq > seq;
          const uint64_t place = behind ? job.las_behind_seq : seq;
          order.push_back({-priority, LasQueueOf(job), place, behind, &id, &shape, &job});
        }
      }
    }
  }
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.class_rank, a.las_queue, a.seq, a.behind, *a.id) <
           std::tie(b.class_rank, b.las_queue, b.seq, b.behind, *b.id);
  });
  for (const Entry& e : order) {
    if (strict_blocked_) break;
    if (Dead(*e.shape)) continue;
    Visit(*e.job);
  }
}

int SchedulePass::LasQueueOf(const QueuedJob& job) const {
  return LasQueue(options_.las, job, s_.accounting.JobGpuSeconds(job.req.id, now_));
}

bool SchedulePass::Outranks(const QueuedJob& head, const QueuedJob& holder) const {
  switch (options_.policy) {
    case SchedulingPolicy::kDefault:
      return holder.req.priority < head.req.priority;
    case SchedulingPolicy::kFifo:
      return false;
    case SchedulingPolicy::kLas: {
      if (holder.req.priority != head.req.priority) return holder.req.priority < head.req.priority;
      // A job that lost its GPUs for order takes them back by recall only.
      if (options_.las.recall_after > Duration::zero() && head.las_recalls) return false;
      // Order alone is worth little lost work: only just after a checkpoint
      // of this attempt (las.h).
      const bool fresh = holder.last_checkpoint && *holder.last_checkpoint >= holder.started &&
                         now_ - *holder.last_checkpoint <= options_.las.checkpoint_window;
      return fresh && holder.order_preemptions < options_.las.max_order_preemptions &&
             LasQueueOf(holder) > LasQueueOf(head);
    }
  }
  return false;
}

bool SchedulePass::Recalling(const QueuedJob& job) const {
  return options_.policy == SchedulingPolicy::kLas && job.las_recalls &&
         options_.las.recall_after > Duration::zero() && now_ - job.queued_at >= options_.las.recall_after;
}

bool SchedulePass::Recalls(const QueuedJob& head, const QueuedJob& holder) const {
  // A recall counts as a preemption for order. A job takes
  // max_order_preemptions of those, and one more only from a recalling job
  // submitted before it: no job is preempted for order more than that
  // limit + 1 times, and two jobs never recall from each other in turn.
  const int limit = options_.las.max_order_preemptions;
  const bool owes = holder.order_preemptions < limit ||
                    (holder.order_preemptions == limit && holder.req.submit_seq > head.req.submit_seq);
  return holder.req.priority == head.req.priority && holder.started >= head.queued_at && owes &&
         Recalling(head);
}

void SchedulePass::Visit(QueuedJob& job) {
  job.reason.pass = s_.pass_id;
  ++visited_;
  if (!s_.HoldOf(job).empty()) {
    job.reason.Set(PendingReason::Code::kHeld);
    return;
  }
  const int quota = s_.TenantQuota(job.req.tenant);
  const int in_use = s_.accounting.GpusInUse(job.req.tenant);
  if (quota >= 0 && in_use + job.req.least_nodes() * job.req.gpus_per_node > quota) {
    job.reason.Set(PendingReason::Code::kQuota);
    job.reason.gpus_in_use = in_use;
    job.reason.quota = quota;
    return;
  }
  // An elastic job takes no more nodes than its tenant's quota leaves.
  const int most = quota >= 0 ? std::min(job.req.nodes, (quota - in_use) / job.req.gpus_per_node) : job.req.nodes;
  if (head_found_) return TryBackfill(job, most);
  PlacementResult placed = PlaceSized(job.req, most, nullptr);
  if (placed.ok()) {
    StartJob(job, placed.nodes);
  } else {
    HandleHead(job, placed.eligible);
  }
}

PlacementResult SchedulePass::PlaceSized(const JobRequest& job, int most, const NodeCaps* caps) {
  if (!job.elastic()) return Place(job, caps);
  // Largest first, each try a fixed-size gang; no size above the nodes
  // that could host a share now (`eligible`) can fit, so the count drops
  // straight to it.
  JobRequest sized = job;
  sized.min_nodes = 0;
  int eligible = 0;
  for (int n = most; n >= job.min_nodes;) {
    sized.nodes = n;
    PlacementResult placed = Place(sized, caps);
    if (placed.ok()) return placed;
    eligible = std::max(eligible, placed.eligible);
    n = std::min(n - 1, placed.eligible);
  }
  // Even the least does not fit: the elastic shape is as dead as a fixed one.
  (caps == nullptr ? failed_uncapped_ : failed_capped_)[ShapeOf(job)] = eligible;
  return PlacementResult{{}, eligible};
}

void SchedulePass::StartJob(QueuedJob& job, const std::vector<int>& nodes) {
  Decision decision;
  decision.kind = Decision::Kind::kStart;
  decision.job = job.req.id;
  for (int node : nodes) {
    decision.placement.push_back(s_.membership.Allocate(node, job.req.id, job.req.gpus_per_node,
                                                        job.req.cpus_per_node,
                                                        job.req.memory_mb_per_node));
  }
  job.state = QueuedJobState::kRunning;
  job.las_behind_seq = 0;
  job.las_recalls = false;
  job.nodes = nodes;
  s_.holders[job.req.id] = &job;
  job.started = now_;
  s_.IndexEnd(job);
  job.borrowed_from.clear();
  job.reason.Set(PendingReason::Code::kNotConsidered);
  s_.accounting.Start(job.req.id, job.req.tenant, job.held_gpus(), now_);
  started_.push_back(job.req.id);
  out_.push_back(std::move(decision));
}

void SchedulePass::HandleHead(QueuedJob& job, int eligible_free) {
  // An elastic head preempts, reserves and waits for its least size only.
  JobRequest least = job.req;
  least.nodes = job.req.least_nodes();
  least.min_nodes = 0;
  const JobRequest& req = least;
  const Resources need = PerNodeNeed(req);
  int hosts = 0;
  std::vector<Resources> base(s_.membership.size());
  std::vector<char> fits(s_.membership.size());  // UpAndStaticallyFits, per node
  int base_fits = 0;
  for (int i = 0; i < s_.membership.size(); ++i) {
    base[i] = FreeOf(s_.membership.node(i));
    fits[i] = UpAndStaticallyFits(s_.membership, i, req);
    hosts += fits[i];
  }
  job.reason.Set(PendingReason::Code::kNotConsidered);
  if (hosts < req.nodes) {  // not even an empty cluster of UP nodes would do
    job.reason.code = PendingReason::Code::kNoFitNow;
    job.reason.eligible = hosts;
    return;
  }
  head_found_ = true;
  head_ = req.id;
  strict_blocked_ = !options_.backfill;

  // GPUs of PREEMPTING jobs are as good as free for deciding what to preempt.
  std::vector<const QueuedJob*> holders;
  holders.reserve(s_.holders.size());
  for (const auto& [id, holder] : s_.holders) holders.push_back(holder);
  std::vector<JobId> preempting;
  for (const QueuedJob* holder : holders) {
    if (holder->state != QueuedJobState::kPreempting) continue;
    bool useful = false;
    for (int node : holder->nodes) {
      base[node] += HoldOf(s_.membership.node(node).holds.at(holder->req.id));
      useful = useful || fits[node];
    }
    if (useful) preempting.push_back(holder->req.id);
  }
  for (int i = 0; i < s_.membership.size(); ++i) {
    if (fits[i] && base[i].Covers(need)) ++base_fits;
  }
  std::vector<JobId> victims;
  if (base_fits < req.nodes) {
    std::vector<PreemptionCandidate> candidates;
    for (const QueuedJob* holder : holders) {
      const QueuedJob& h = *holder;
      if (h.state != QueuedJobState::kRunning || !h.req.preemptible) continue;
      bool lower = (Outranks(job, h) && now_ - h.started >= options_.min_run_time) || Recalls(job, h);
      bool borrowed = h.borrowed_from == req.id;  // only from this head's reservation
      if (!lower && !borrowed) continue;
      PreemptionCandidate c;
      c.job = h.req.id;
      c.gpus = h.held_gpus();
      TimePoint since = h.started;
      if (h.last_checkpoint && *h.last_checkpoint > since) since = *h.last_checkpoint;
      c.lost_gpu_us = std::max<int64_t>(0, Micros(now_ - since)) * c.gpus;
      for (int node : h.nodes) {
        c.holds.emplace_back(node, HoldOf(s_.membership.node(node).holds.at(h.req.id)));
      }
      candidates.push_back(std::move(c));
    }
    if (auto plan = PlanPreemption(s_.membership, req, base, std::move(candidates),
                                   options_.exact_preemption_limit)) {
      for (const JobId& id : plan->victims) {
        QueuedJob& victim = s_.jobs.at(id);
        if (options_.policy == SchedulingPolicy::kLas && victim.req.priority == job.req.priority) {
          // Preempted for order: once requeued (its service forgiven), it
          // returns right behind the job that took its place (las.h).
          ++victim.order_preemptions;
          victim.las_behind_seq = job.req.submit_seq;
          victim.las_recalls = true;
        }
        victim.state = QueuedJobState::kPreempting;
        victim.preempt_deadline = now_ + victim.req.grace;
        s_.IndexEnd(victim);
        Decision decision;
        decision.kind = Decision::Kind::kPreempt;
        decision.job = id;
        decision.grace = victim.req.grace;
        out_.push_back(std::move(decision));
        victims.push_back(id);
      }
    }
  } else {
    victims = preempting;
  }
  // Victims were re-indexed above: their ends are now their deadlines.
  reservation_ = ComputeReservation(s_.membership, req, s_.ends, fits, now_);
  if (!victims.empty() && (base_fits >= req.nodes || reservation_)) {
    std::sort(victims.begin(), victims.end());
    head_waits_preemption_ = true;
    job.reason.code = PendingReason::Code::kWaitingPreemption;
    job.reason.victims = victims;
  } else {
    job.reason.code = PendingReason::Code::kHoldsReservation;
    job.reason.eligible = eligible_free;
  }
  if (reservation_) {
    job.reason.finite = reservation_->finite;
    job.reason.when = reservation_->start;
  }
}

void SchedulePass::TryBackfill(QueuedJob& job, int most) {
  const JobRequest& req = job.req;
  job.reason.Set(PendingReason::Code::kNotConsidered);
  if (!reservation_) {  // defensive: the head had no reservation
    PlacementResult placed = PlaceSized(req, most, nullptr);
    if (placed.ok()) return StartJob(job, placed.nodes);
    job.reason.code = PendingReason::Code::kNoFree;
    job.reason.eligible = placed.eligible;
    return;
  }
  Reservation& reservation = *reservation_;
  job.reason.finite = reservation.finite;
  job.reason.when = reservation.start;
  const bool ends_before = reservation.EndsBefore(now_, req.time_limit);
  PlacementResult placed = PlaceSized(req, most, ends_before ? nullptr : &reservation.slack);
  // Borrowing pays only while the head waits for jobs to end on their own:
  // GPUs its victims free are its own, and a borrower there would be
  // preempted again as soon as the last victim exits.
  // Under LAS only a lower class borrows: a borrower of the head's own class
  // would be preempted as the head starts and then wait behind newer jobs.
  bool borrow = false;
  if (!placed.ok() && !ends_before && req.preemptible && req.priority <= reservation.priority &&
      !head_waits_preemption_ &&
      (options_.policy != SchedulingPolicy::kLas || req.priority < reservation.priority)) {
    placed = PlaceSized(req, most, nullptr);
    borrow = placed.ok();
  }
  if (placed.ok()) {
    if (!ends_before) {
      for (int node : placed.nodes) ConsumeSlack(reservation, node, PerNodeNeed(req));
    }
    StartJob(job, placed.nodes);
    if (borrow) job.borrowed_from = reservation.job;
    return;
  }
  PlacementResult uncapped = ends_before ? placed : PlaceSized(req, most, nullptr);
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
