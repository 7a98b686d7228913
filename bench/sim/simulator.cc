#include "bench/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "bench/sim/sim_random.h"
#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/billing/bill.h"
#include "coordinator/billing/calendar.h"
#include "coordinator/billing/ledger.h"
#include "coordinator/billing/meter.h"
#include "coordinator/billing/price_book.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::sim {

std::vector<PolicyRun> ComparedPolicies(const sched::SchedulerOptions& base) {
  auto with = [&](sched::SchedulingPolicy policy, bool backfill) {
    sched::SchedulerOptions o = base;
    o.policy = policy;
    o.backfill = backfill;
    return o;
  };
  return {{"fifo", with(sched::SchedulingPolicy::kFifo, false)},
          {"fifo-backfill", with(sched::SchedulingPolicy::kFifo, true)},
          {"default", with(sched::SchedulingPolicy::kDefault, true)},
          {"las", with(sched::SchedulingPolicy::kLas, true)}};
}

namespace {

// Past this much simulated time after the last arrival the run stops and
// counts what has not finished (a policy that never starts a job ends too).
constexpr int64_t kHorizonS = 20LL * 365 * 86400;

// What a GPU-hour costs when credit is modelled: 1.00.
constexpr int64_t kGpuHourMicros = 1000000;

// Events of one instant run in this order: GPUs come back before anything
// else looks at them (and are charged for); a month's grant before a credit
// check; the tick only makes sure a pass runs.
enum class EventKind {
  kFinish, kPreemptExit, kNodeFail, kNodeRepair, kCheckpoint, kMonth, kCredit, kTick
};

struct Event {
  int64_t t_s;
  EventKind kind;
  uint64_t seq;  // insertion order: ties never depend on the heap
  int index;     // job, node or credit tenant
  int attempt;   // the job's attempt it belongs to; a credit check's generation
  bool operator>(const Event& o) const {
    return std::tie(t_s, kind, seq) > std::tie(o.t_s, o.kind, o.seq);
  }
};

enum class JobPhase { kUnsubmitted, kPending, kRunning, kPreempting, kDone };

struct LiveJob {
  JobPhase phase = JobPhase::kUnsubmitted;
  int attempt = 0;
  int64_t attempt_start_s = 0;
  int64_t remaining_s = 0;  // work left, from the last kept checkpoint: seconds on all its nodes
  int64_t preempted_at_s = 0;
  int64_t pending_since_s = 0;
  int size = 0;             // nodes held by the current attempt
  // Wall seconds the current attempt needs for `remaining_s` on `size` nodes
  // (rounded up; exactly remaining_s on all of them).
  int64_t WallLeft(const SimJob& job) const { return (remaining_s * job.nodes + size - 1) / size; }
  int held_gpus(const SimJob& job) const { return size * job.gpus_per_node; }
};

// A tenant with a plan (SimOptions::monthly_gpu_h).
struct CreditTenant {
  billing::Plan plan;
  std::vector<int> jobs;   // its jobs, by workload index
  std::set<int> holding;   // those whose attempt holds GPUs
  int pending = 0;         // those pending
  bool held = false;       // out of credit: jobs held, attempts stopped
  int64_t held_since_s = 0;
  int generation = 0;      // of the credit check queued last; earlier ones are void
};

class Run {
 public:
  Run(const Workload& w, const PolicyRun& policy, const SimOptions& o)
      : w_(w), o_(o), scheduler_(&clock_, policy.options), rng_(o.seed) {
    result_.policy = policy.name;
    result_.jobs.resize(w.jobs.size());
    live_.resize(w.jobs.size());
  }

  absl::StatusOr<SimResult> Go();

 private:
  void Push(int64_t t, EventKind kind, int index, int attempt = 0) {
    events_.push(Event{t, kind, seq_++, index, attempt});
  }
  void AdvanceTo(int64_t t);
  void HandleEvent(const Event& e);
  absl::Status Submit(int index);
  void Apply(const sched::Decision& d);
  // The attempt of job `index` ends at now_ without finishing: `requeue`d
  // work resumes from the last checkpoint at or before `cut_s`.
  void EndAttempt(int index, int64_t cut_s);
  // Elastic job `index`, below its size, stops to start again larger.
  void Grow(int index);
  // Job `index` is stopped as the coordinator stops it (its checkpoint is
  // kept, its GPUs come back preempt_exit_s later).
  void Stop(int index);
  // ---- credit (SimOptions::monthly_gpu_h)
  absl::Status SetUpCredit();
  // Charges job `index`'s attempt for the GPUs it held up to `to_s`.
  void Charge(int index, int64_t to_s);
  // A month began: each plan's grant (and the expiry of the last one's rest).
  void GrantMonth();
  // Charges tenant `t`'s attempts up to now and acts on its level: out of
  // credit, its jobs are held and its running attempts stopped; in credit
  // again, the hold goes. Then queues the next check.
  void CheckCredit(int t);
  // Queues tenant `t`'s next check when what it has left runs out at the
  // rate its attempts hold GPUs (at once when nothing is left).
  void PlanCreditCheck(int t);
  // Job `index`'s attempt took (`holds`) or gave back its GPUs.
  void OnCreditHold(int index, bool holds);
  void OnCreditPending(int index, int delta) {
    if (credit_of_.empty() || credit_of_[index] < 0) return;
    credit_[credit_of_[index]].pending += delta;
  }
  // Pending jobs of tenants out of credit: no pass can start them.
  int64_t HeldPending() const;
  void ScheduleNextFailure();
  int64_t StrandedGpus() const;

  const Workload& w_;
  const SimOptions& o_;
  FakeClock clock_;
  sched::Scheduler scheduler_;
  SimRandom rng_;
  SimResult result_;
  std::vector<LiveJob> live_;
  std::unordered_map<std::string, int> index_of_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  int64_t now_ = 0;
  int64_t busy_gpus_ = 0;
  int64_t holding_jobs_ = 0;  // running or preempting
  int64_t stranded_ = 0;  // as of the last pass
  std::multiset<int> pending_shares_;  // gpus_per_node of each pending job
  size_t done_ = 0;
  bool tick_queued_ = false;
  std::set<int> down_;  // failed nodes, until repaired
  coord::PriceBook book_;
  coord::Ledger ledger_;
  std::vector<CreditTenant> credit_;
  std::vector<int> credit_of_;  // per job: its tenant in credit_, or -1 (empty: no credit)
};

void Run::AdvanceTo(int64_t t) {
  const auto dt = static_cast<double>(t - now_);
  result_.busy_gpu_s += static_cast<double>(busy_gpus_) * dt;
  const int64_t arriving = std::max<int64_t>(0, std::min(t, result_.last_submit_s) - now_);
  result_.busy_gpu_s_arrivals += static_cast<double>(busy_gpus_ * arriving);
  result_.stranded_gpu_s += static_cast<double>(stranded_) * dt;
  clock_.Advance(std::chrono::seconds(t - now_));
  now_ = t;
}

absl::Status Run::Submit(int index) {
  const SimJob& job = w_.jobs[index];
  sched::JobRequest r;
  r.id = job.id;
  r.tenant = job.tenant;
  r.priority = job.priority;
  r.preemptible = true;
  r.nodes = job.nodes;
  r.min_nodes = job.min_nodes;
  r.gpus_per_node = job.gpus_per_node;
  r.cpus_per_node = job.cpus_per_node;
  r.memory_mb_per_node = job.memory_mb_per_node;
  r.gpu_model = job.gpu_model;
  if (o_.limit_factor > 0) {
    r.time_limit = Seconds(std::max(1.0, o_.limit_factor * static_cast<double>(job.duration_s)));
  }
  JobOutcome& out = result_.jobs[index];
  out.submit_s = job.submit_s;
  out.gpus = job.total_gpus();
  out.priority = job.priority;
  out.run_s = job.duration_s;
  absl::Status status = scheduler_.Submit(std::move(r));
  if (absl::IsInvalidArgument(status)) {  // can never fit this cluster
    ++result_.rejected;
    live_[index].phase = JobPhase::kDone;
    ++done_;
    return absl::OkStatus();
  }
  if (!status.ok()) return status;  // a duplicate id: the workload is wrong
  live_[index].phase = JobPhase::kPending;
  live_[index].remaining_s = job.duration_s;
  live_[index].pending_since_s = now_;
  pending_shares_.insert(job.gpus_per_node);
  OnCreditPending(index, +1);
  return absl::OkStatus();
}

void Run::Apply(const sched::Decision& d) {
  const int index = index_of_.at(d.job);
  LiveJob& live = live_[index];
  const SimJob& job = w_.jobs[index];
  if (d.kind == sched::Decision::Kind::kStart) {
    pending_shares_.erase(pending_shares_.find(job.gpus_per_node));
    live.phase = JobPhase::kRunning;
    live.attempt_start_s = now_;
    live.size = static_cast<int>(d.placement.size());
    JobOutcome& out = result_.jobs[index];
    if (out.first_start_s < 0) out.first_start_s = now_;
    busy_gpus_ += live.held_gpus(job);
    ++holding_jobs_;
    Push(now_ + live.WallLeft(job), EventKind::kFinish, index, live.attempt);
    if (o_.checkpoint_interval_s > 0 && o_.checkpoint_interval_s < live.WallLeft(job)) {
      Push(now_ + o_.checkpoint_interval_s, EventKind::kCheckpoint, index, live.attempt);
    }
    OnCreditPending(index, -1);
    OnCreditHold(index, true);
    return;
  }
  // Preempted: it checkpoints nothing new; its GPUs come back at exit.
  live.phase = JobPhase::kPreempting;
  ++result_.preemptions;
  ++result_.jobs[index].preemptions;
  Push(now_ + o_.preempt_exit_s, EventKind::kPreemptExit, index, live.attempt);
  live.preempted_at_s = now_;
}

void Run::Stop(int index) {
  LiveJob& live = live_[index];
  const SimJob& job = w_.jobs[index];
  ATHANOR_CHECK(scheduler_.MarkPreempting(job.id, clock_.Now() + std::chrono::seconds(o_.preempt_exit_s)).ok());
  live.phase = JobPhase::kPreempting;
  live.preempted_at_s = now_;
  Push(now_ + o_.preempt_exit_s, EventKind::kPreemptExit, index, live.attempt);
}

void Run::Grow(int index) {
  // As the coordinator resizes one: stopped right after a committed
  // checkpoint, its GPUs back when its ranks have exited.
  Stop(index);
  ++result_.grows;
  ++result_.jobs[index].grows;
}

void Run::EndAttempt(int index, int64_t cut_s) {
  LiveJob& live = live_[index];
  const SimJob& job = w_.jobs[index];
  const int64_t ran = std::max<int64_t>(0, cut_s - live.attempt_start_s);
  const int64_t kept = o_.checkpoint_interval_s > 0 ? ran / o_.checkpoint_interval_s * o_.checkpoint_interval_s : 0;
  const int64_t held = now_ - live.attempt_start_s;
  JobOutcome& out = result_.jobs[index];
  out.held_s += held;
  out.lost_gpu_s += static_cast<double>((held - kept) * live.held_gpus(job));
  // On fewer nodes than its size an elastic job did proportionally less.
  live.remaining_s -= kept * live.size / job.nodes;
  OnCreditHold(index, false);
  live.phase = JobPhase::kPending;
  live.pending_since_s = now_;
  ++live.attempt;
  busy_gpus_ -= live.held_gpus(job);
  --holding_jobs_;
  pending_shares_.insert(job.gpus_per_node);
  OnCreditPending(index, +1);
  // The scheduler holds the job (it started it); an error here is a bug.
  ATHANOR_CHECK(scheduler_.OnJobExited(job.id, /*requeue=*/true).ok()) << job.id;
}


void Run::HandleEvent(const Event& e) {
  switch (e.kind) {
    case EventKind::kFinish:
    case EventKind::kPreemptExit:
    case EventKind::kCheckpoint: {
      LiveJob& live = live_[e.index];
      const bool current = e.attempt == live.attempt &&
                           (live.phase == JobPhase::kRunning || live.phase == JobPhase::kPreempting);
      if (!current) return;  // an earlier attempt's event
      const SimJob& job = w_.jobs[e.index];
      if (e.kind == EventKind::kCheckpoint) {
        if (live.phase != JobPhase::kRunning) return;  // no checkpoints while exiting
        ATHANOR_CHECK(scheduler_.OnCheckpoint(job.id, clock_.Now()).ok()) << job.id;
        if (job.elastic() && live.size < job.nodes && scheduler_.GrowableNodes(job.id) > 0) {
          return Grow(e.index);
        }
        if (now_ + o_.checkpoint_interval_s < live.attempt_start_s + live.WallLeft(job)) {
          Push(now_ + o_.checkpoint_interval_s, EventKind::kCheckpoint, e.index, live.attempt);
        }
        return;
      }
      if (e.kind == EventKind::kPreemptExit) return EndAttempt(e.index, live.preempted_at_s);
      JobOutcome& out = result_.jobs[e.index];
      out.held_s += now_ - live.attempt_start_s;
      out.finish_s = now_;
      OnCreditHold(e.index, false);
      live.phase = JobPhase::kDone;
      ++done_;
      busy_gpus_ -= live.held_gpus(job);
      --holding_jobs_;
      ATHANOR_CHECK(scheduler_.OnJobExited(job.id, /*requeue=*/false).ok()) << job.id;
      return;
    }
    case EventKind::kNodeFail: {
      const sched::NodeSpec& node = w_.nodes[e.index];
      if (!down_.insert(e.index).second) return;  // already down
      ++result_.node_failures;
      auto holders = scheduler_.SetNodeState(node.name, sched::MemberState::kDown);
      ATHANOR_CHECK(holders.ok()) << holders.status();
      for (const sched::JobId& id : *holders) {
        const int index = index_of_.at(id);
        ++result_.jobs[index].failures;
        const LiveJob& live = live_[index];
        EndAttempt(index, live.phase == JobPhase::kPreempting ? live.preempted_at_s : now_);
      }
      Push(now_ + o_.repair_s, EventKind::kNodeRepair, e.index);
      return;
    }
    case EventKind::kNodeRepair:
      down_.erase(e.index);
      ATHANOR_CHECK(scheduler_.SetNodeState(w_.nodes[e.index].name, sched::MemberState::kUp).ok());
      return;
    case EventKind::kMonth:
      return GrantMonth();
    case EventKind::kCredit:
      if (e.attempt == credit_[e.index].generation) CheckCredit(e.index);
      return;
    case EventKind::kTick:
      tick_queued_ = false;
      return;
  }
}

absl::Status Run::SetUpCredit() {
  if (!(o_.monthly_gpu_h > 0)) return absl::OkStatus();
  billing::Price price;
  price.set_gpu_model(coord::kDefaultPriceModel);
  price.set_gpu_hour_micros(kGpuHourMicros);
  if (absl::Status set = book_.Set(&price, now_ * 1000); !set.ok()) return set;
  std::map<std::string, int> index_of;
  for (const SimJob& job : w_.jobs) index_of.emplace(job.tenant, -1);
  if (o_.credit_tenants.empty()) {
    for (auto& [tenant, t] : index_of) t = 0;
  } else {
    for (const std::string& tenant : o_.credit_tenants) {
      auto it = index_of.find(tenant);
      if (it == index_of.end()) {
        return absl::InvalidArgumentError(absl::StrCat("credit tenant '", tenant, "' has no jobs in the workload"));
      }
      it->second = 0;
    }
  }
  for (auto& [tenant, t] : index_of) {
    if (t < 0) continue;
    t = static_cast<int>(credit_.size());
    CreditTenant& c = credit_.emplace_back();
    c.plan.set_tenant(tenant);
    c.plan.set_monthly_allowance_micros(std::llround(o_.monthly_gpu_h * kGpuHourMicros));
  }
  credit_of_.assign(w_.jobs.size(), -1);
  for (size_t i = 0; i < w_.jobs.size(); ++i) {
    const int t = index_of.at(w_.jobs[i].tenant);
    credit_of_[i] = t;
    if (t >= 0) credit_[t].jobs.push_back(static_cast<int>(i));
  }
  return absl::OkStatus();
}

void Run::Charge(int index, int64_t to_s) {
  const LiveJob& live = live_[index];
  const SimJob& job = w_.jobs[index];
  // Attempts are numbered from 1 in the ledger, as the coordinator's.
  const int32_t attempt = live.attempt + 1;
  coord::AttemptHold hold{job.tenant, job.id, attempt, {{job.gpu_model, live.held_gpus(job), 0, 0}}};
  const int64_t from_ms = std::max(live.attempt_start_s * 1000, ledger_.MeteredUntil(job.id, attempt));
  for (billing::LedgerEntry& e : coord::Accruals(ledger_, book_, hold, from_ms, to_s * 1000, to_s * 1000)) {
    ledger_.Append(std::move(e));
  }
}

void Run::GrantMonth() {
  for (CreditTenant& c : credit_) {
    for (int index : c.holding) Charge(index, now_);  // the old month's use first
    for (billing::LedgerEntry& e : coord::AllowanceEntries(ledger_, c.plan, now_ * 1000)) {
      ledger_.Append(std::move(e));
    }
  }
  for (size_t t = 0; t < credit_.size(); ++t) CheckCredit(static_cast<int>(t));
  Push(coord::NextMonthStartMs(now_ * 1000) / 1000, EventKind::kMonth, 0);
}

void Run::CheckCredit(int t) {
  CreditTenant& c = credit_[t];
  for (int index : c.holding) Charge(index, now_);
  const std::string& tenant = c.plan.tenant();
  const bool out = coord::LevelOf(ledger_, &c.plan, tenant) == coord::CreditLevel::kOut;
  if (out && !c.held) {
    c.held = true;
    c.held_since_s = now_;
    ++result_.credit_holds;
    scheduler_.SetTenantHold(tenant, absl::StrCat("held: tenant ", tenant, " is out of credit"));
    for (int index : c.holding) {
      if (live_[index].phase != JobPhase::kRunning) continue;  // already on its way out
      Stop(index);
      ++result_.credit_stops;
      ++result_.jobs[index].credit_stops;
    }
  } else if (!out && c.held) {
    c.held = false;
    for (int index : c.jobs) {
      if (live_[index].phase != JobPhase::kPending) continue;
      result_.jobs[index].credit_held_s += now_ - std::max(live_[index].pending_since_s, c.held_since_s);
    }
    scheduler_.SetTenantHold(tenant, "");
  }
  PlanCreditCheck(t);
}

void Run::PlanCreditCheck(int t) {
  CreditTenant& c = credit_[t];
  ++c.generation;  // an earlier plan is void
  if (c.held) return;  // the next month's grant checks it
  // What is left, less what its attempts have used since they were charged.
  int64_t left = coord::Available(ledger_, &c.plan, c.plan.tenant());
  int64_t gpus = 0;
  for (int index : c.holding) {
    const LiveJob& live = live_[index];
    const SimJob& job = w_.jobs[index];
    const int64_t from_ms = std::max(live.attempt_start_s * 1000, ledger_.MeteredUntil(job.id, live.attempt + 1));
    left -= static_cast<int64_t>(static_cast<__int128>(live.held_gpus(job)) * (now_ * 1000 - from_ms) *
                                 kGpuHourMicros / 3600000);
    gpus += live.held_gpus(job);
  }
  if (left > 0 && gpus == 0) return;  // spends nothing
  int64_t in_s = 0;
  if (left > 0) {
    const __int128 per_hour = static_cast<__int128>(gpus) * kGpuHourMicros;
    in_s = std::max<int64_t>(1, static_cast<int64_t>((static_cast<__int128>(left) * 3600 + per_hour - 1) / per_hour));
  }
  Push(now_ + in_s, EventKind::kCredit, t, c.generation);
}

void Run::OnCreditHold(int index, bool holds) {
  if (credit_of_.empty() || credit_of_[index] < 0) return;
  const int t = credit_of_[index];
  if (holds) {
    credit_[t].holding.insert(index);
  } else {
    Charge(index, now_);  // to its release
    credit_[t].holding.erase(index);
  }
  PlanCreditCheck(t);
}

int64_t Run::HeldPending() const {
  int64_t held = 0;
  for (const CreditTenant& c : credit_) held += c.held ? c.pending : 0;
  return held;
}

void Run::ScheduleNextFailure() {
  if (!(o_.mtbf_s > 0) || w_.nodes.empty() || done_ == w_.jobs.size()) return;
  // Each node fails at rate 1/mtbf; the cluster at nodes/mtbf, on a node
  // chosen uniformly.
  const double gap = rng_.Exponential(o_.mtbf_s / static_cast<double>(w_.nodes.size()));
  const int node = static_cast<int>(rng_.Below(w_.nodes.size()));
  Push(now_ + std::max<int64_t>(1, static_cast<int64_t>(gap)), EventKind::kNodeFail, node);
}

int64_t Run::StrandedGpus() const {
  if (pending_shares_.empty()) return 0;
  // Free GPUs on UP nodes with fewer free than the smallest node share any
  // waiting job asks for: no waiting job can use them.
  const int smallest = *pending_shares_.begin();
  const sched::Membership& members = scheduler_.view().membership();
  int64_t stranded = 0;
  for (const std::string& model : members.Models()) {
    for (int free = 1; free < smallest; ++free) {
      if (const std::set<int>* bucket = members.Bucket(model, free)) {
        stranded += static_cast<int64_t>(bucket->size()) * free;
      }
    }
  }
  return stranded;
}

absl::StatusOr<SimResult> Run::Go() {
  for (const sched::NodeSpec& node : w_.nodes) {
    absl::Status added = scheduler_.AddNode(node);
    if (!added.ok()) return added;
    result_.total_gpus += node.gpus;
  }
  for (size_t i = 0; i < w_.jobs.size(); ++i) {
    if (!index_of_.emplace(w_.jobs[i].id, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("job id ", w_.jobs[i].id, " appears twice"));
    }
  }
  if (w_.jobs.empty()) return result_;
  now_ = result_.start_s = w_.jobs.front().submit_s;
  result_.last_submit_s = w_.jobs.back().submit_s;
  const int64_t horizon = w_.jobs.back().submit_s + kHorizonS;
  if (absl::Status credit = SetUpCredit(); !credit.ok()) return credit;
  if (!credit_.empty()) GrantMonth();
  ScheduleNextFailure();
  size_t next = 0;
  while (done_ < w_.jobs.size()) {
    int64_t t = next < w_.jobs.size() ? w_.jobs[next].submit_s : INT64_MAX;
    if (!events_.empty()) t = std::min(t, events_.top().t_s);
    if (t == INT64_MAX || t > horizon) break;
    AdvanceTo(t);
    while (!events_.empty() && events_.top().t_s == t) {
      const Event e = events_.top();
      events_.pop();
      HandleEvent(e);
      if (e.kind == EventKind::kNodeFail) ScheduleNextFailure();
    }
    for (; next < w_.jobs.size() && w_.jobs[next].submit_s == t; ++next) {
      absl::Status submitted = Submit(static_cast<int>(next));
      if (!submitted.ok()) return submitted;
    }
    result_.pass_work.push_back(static_cast<int64_t>(w_.nodes.size() + pending_shares_.size()) + holding_jobs_);
    const auto start = std::chrono::steady_clock::now();
    std::vector<sched::Decision> decisions = scheduler_.Schedule();
    result_.pass_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    for (const sched::Decision& d : decisions) Apply(d);
    stranded_ = StrandedGpus();
    const auto pending = static_cast<int64_t>(pending_shares_.size());
    if (result_.steps.empty() || result_.steps.back().busy_gpus != busy_gpus_ ||
        result_.steps.back().pending != pending) {
      result_.steps.push_back({now_, busy_gpus_, pending});
    }
    if (pending > HeldPending() && !tick_queued_) {
      Push(now_ + o_.tick_s, EventKind::kTick, 0);
      tick_queued_ = true;
    }
  }
  result_.end_s = now_;
  return std::move(result_);
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const Workload& workload, const PolicyRun& policy,
                                   const SimOptions& options) {
  if (options.checkpoint_interval_s < 0 || options.mtbf_s < 0 || options.repair_s < 1 ||
      options.preempt_exit_s < 0 || options.tick_s < 1 || options.limit_factor < 0) {
    return absl::InvalidArgumentError(
        "simulator: checkpoint interval, MTBF, exit delay and limit factor must be >= 0; repair and "
        "tick >= 1 s");
  }
  if (!(options.monthly_gpu_h >= 0) || options.monthly_gpu_h > 1e9) {
    return absl::InvalidArgumentError("simulator: monthly GPU-hours must be in [0, 1e9]");
  }
  Run run(workload, policy, options);
  return run.Go();
}

}  // namespace athanor::sim
