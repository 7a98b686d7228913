// Property tests: thousands of seeded random operations, with invariants
// checked against an independent ledger after every pass, and a comparison of
// the top gang's start time with backfill on and off.
#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduler/scheduler.h"
#include "coordinator/scheduler/test_util.h"

namespace athanor::sched {
namespace {

using std::chrono::seconds;

// The test's own view of who holds which GPU, built only from decisions.
class Ledger {
 public:
  explicit Ledger(const std::map<std::string, NodeSpec>& nodes) : nodes_(nodes) {}

  void Start(const JobRequest& job, const Decision& d, const std::map<std::string, MemberState>& state) {
    const int size = static_cast<int>(d.placement.size());
    // All or nothing; an elastic job: any size from its least to its most.
    ASSERT_TRUE(size == job.nodes || (job.elastic() && size >= job.min_nodes && size < job.nodes))
        << "partial gang " << job.id << ": " << size << " of " << job.nodes;
    std::set<std::string> distinct;
    for (const NodeAllocation& alloc : d.placement) {
      ASSERT_TRUE(distinct.insert(alloc.node).second) << job.id << " twice on " << alloc.node;
      ASSERT_EQ(static_cast<int>(alloc.gpu_ids.size()), job.gpus_per_node) << job.id;
      ASSERT_EQ(state.at(alloc.node), MemberState::kUp) << job.id << " on non-UP " << alloc.node;
      const NodeSpec& spec = nodes_.at(alloc.node);
      ASSERT_TRUE(StaticallyFits(spec, job)) << job.id << " on unfit " << alloc.node;
      cpus_[alloc.node] += job.cpus_per_node;
      ASSERT_LE(cpus_[alloc.node], spec.cpus) << "CPUs over-committed on " << alloc.node;
      for (int gpu : alloc.gpu_ids) {
        ASSERT_TRUE(gpu >= 0 && gpu < spec.gpus);
        auto [it, fresh] = owner_.emplace(std::make_pair(alloc.node, gpu), job.id);
        ASSERT_TRUE(fresh) << "GPU " << alloc.node << ":" << gpu << " given to " << job.id
                           << " while held by " << it->second;
      }
    }
    held_[job.id] = d.placement;
    tenant_gpus_[job.tenant] += size * job.gpus_per_node;
  }
  void Exit(const JobRequest& job) {
    tenant_gpus_[job.tenant] -= static_cast<int>(held_.at(job.id).size()) * job.gpus_per_node;
    for (const NodeAllocation& alloc : held_.at(job.id)) {
      cpus_[alloc.node] -= job.cpus_per_node;
      for (int gpu : alloc.gpu_ids) owner_.erase({alloc.node, gpu});
    }
    held_.erase(job.id);
  }
  int TenantGpus(const std::string& t) { return tenant_gpus_[t]; }
  bool Holds(const JobId& id) const { return held_.count(id) > 0; }
  int Size(const JobId& id) const { return static_cast<int>(held_.at(id).size()); }
  // UP nodes `id` does not hold with `gpus` GPUs free.
  int NodesWithFree(const JobId& id, int gpus, const std::map<std::string, MemberState>& state) const {
    int count = 0;
    for (const auto& [name, spec] : nodes_) {
      if (state.at(name) != MemberState::kUp) continue;
      int used = 0;
      bool mine = false;
      for (const auto& [key, owner] : owner_) {
        if (key.first != name) continue;
        ++used;
        mine = mine || owner == id;
      }
      if (!mine && spec.gpus - used >= gpus) ++count;
    }
    return count;
  }
  std::vector<JobId> HoldersOn(const std::string& node) const {
    std::vector<JobId> out;
    for (const auto& [id, placement] : held_) {
      for (const auto& alloc : placement) {
        if (alloc.node == node) out.push_back(id);
      }
    }
    return out;
  }
  std::vector<JobId> All() const {
    std::vector<JobId> out;
    for (const auto& [id, p] : held_) out.push_back(id);
    return out;
  }

 private:
  const std::map<std::string, NodeSpec>& nodes_;
  std::map<std::pair<std::string, int>, JobId> owner_;
  std::map<JobId, std::vector<NodeAllocation>> held_;
  std::map<std::string, int> cpus_;
  std::map<std::string, int> tenant_gpus_;
};

void RunRandomWorkload(uint32_t seed, bool backfill, int* grown) {
  std::mt19937 rng(seed);
  FakeClock clock;
  SchedulerOptions options;
  options.backfill = backfill;
  Scheduler sched(&clock, options);
  std::map<std::string, NodeSpec> nodes;
  std::map<std::string, MemberState> state;
  for (int i = 0; i < 24; ++i) {
    NodeSpec spec = testing::MakeNode(absl::StrCat("n", i), i % 3 == 0 ? 4 : 8,
                                      i % 4 == 0 ? "A100" : "H100", absl::StrCat("s", i / 6),
                                      absl::StrCat("r", i / 12));
    spec.cpus = 32;
    nodes[spec.name] = spec;
    state[spec.name] = MemberState::kUp;
    ASSERT_TRUE(sched.AddNode(spec).ok());
  }
  const std::vector<std::string> tenants = {"a", "b", "c"};
  const std::map<std::string, int> quota = {{"a", 64}, {"b", 40}};
  for (const auto& [t, q] : quota) sched.SetTenant(t, q);
  sched.SetTenant("c", -1, 2.0);
  Ledger ledger(nodes);
  std::map<JobId, JobRequest> requests;
  std::set<JobId> pending;
  int next_id = 0, starts = 0, preempts = 0, smaller = 0, grows = 0, below_most = 0;

  auto exit_job = [&](const JobId& id, bool requeue) {
    ledger.Exit(requests.at(id));
    ASSERT_TRUE(sched.OnJobExited(id, requeue).ok());
    if (requeue) {
      pending.insert(id);
    } else {
      requests.erase(id);
    }
  };
  for (int step = 0; step < 3000; ++step) {
    clock.Advance(seconds(1 + rng() % 120));
    int op = rng() % 100;
    if (op < 40) {  // submit
      JobRequest job = testing::MakeJob(absl::StrCat("j", next_id++), 1 + (rng() % 10 == 0 ? rng() % 4 : 0),
                                        1 << (rng() % 4), tenants[rng() % 3], rng() % 3);
      if (rng() % 3 == 0) job.gpu_model = rng() % 2 ? "H100" : "A100";
      job.cpus_per_node = rng() % 12;
      job.preemptible = rng() % 2;
      if (rng() % 2) job.time_limit = seconds(60 + rng() % 3000);
      if (job.nodes > 1 && rng() % 3 == 0) job.min_nodes = 1 + static_cast<int>(rng() % job.nodes);
      absl::Status s = sched.Submit(job);
      if (s.ok()) {
        requests[job.id] = sched.view().job(job.id)->req;
        pending.insert(job.id);
      } else {
        ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      }
    } else if (op < 48 && !pending.empty()) {  // cancel
      auto it = std::next(pending.begin(), rng() % pending.size());
      ASSERT_TRUE(sched.Cancel(*it).ok());
      requests.erase(*it);
      pending.erase(it);
    } else if (op < 75) {  // completion, failure with requeue
      auto held = ledger.All();
      if (!held.empty()) exit_job(held[rng() % held.size()], rng() % 4 == 0);
    } else if (op < 80) {  // checkpoint; an elastic job may grow at one
      auto held = ledger.All();
      if (!held.empty()) {
        const JobId id = held[rng() % held.size()];
        ASSERT_TRUE(sched.OnCheckpoint(id, clock.Now()).ok());
        const JobRequest& job = requests.at(id);
        const int more = sched.GrowableNodes(id);
        const int size = ledger.Size(id);
        if (!job.elastic() || !pending.empty()) {
          ASSERT_EQ(more, 0) << id;
        }
        ASSERT_LE(size + more, job.nodes) << id << " would grow past its most";
        ASSERT_LE(more, ledger.NodesWithFree(id, job.gpus_per_node, state)) << id;
        if (more > 0) {
          ++grows;
          exit_job(id, true);  // the coordinator's grow: a requeue at once
        }
      }
    } else if (op < 86) {  // node down: its jobs fail and requeue
      std::string node = absl::StrCat("n", rng() % 24);
      auto jobs = sched.SetNodeState(node, MemberState::kDown);
      ASSERT_TRUE(jobs.ok());
      state[node] = MemberState::kDown;
      ASSERT_EQ(*jobs, ledger.HoldersOn(node));
      for (const JobId& id : *jobs) exit_job(id, true);
    } else if (op < 91) {  // drain
      std::string node = absl::StrCat("n", rng() % 24);
      ASSERT_TRUE(sched.SetNodeState(node, MemberState::kDraining).ok());
      state[node] = MemberState::kDraining;
    } else {  // node back up
      std::string node = absl::StrCat("n", rng() % 24);
      ASSERT_TRUE(sched.AddNode(nodes[node]).ok());
      state[node] = MemberState::kUp;
    }
    for (const Decision& d : sched.Schedule()) {
      const JobRequest& job = requests.at(d.job);
      if (d.kind == Decision::Kind::kStart) {
        ASSERT_TRUE(pending.erase(d.job)) << d.job << " started but was not pending";
        ledger.Start(job, d, state);
        if (::testing::Test::HasFatalFailure()) return;
        ++starts;
        if (static_cast<int>(d.placement.size()) < job.nodes) ++smaller;
      } else {
        ASSERT_TRUE(ledger.Holds(d.job));
        ASSERT_TRUE(job.preemptible) << d.job;
        ASSERT_EQ(sched.view().job(d.job)->state, QueuedJobState::kPreempting);
        ++preempts;
        if (rng() % 2) exit_job(d.job, true);  // some exit at once, others later
      }
    }
    for (const auto& [t, q] : quota) ASSERT_LE(ledger.TenantGpus(t), q) << "quota of " << t;
    for (const auto& t : tenants) {
      ASSERT_EQ(ledger.TenantGpus(t), sched.view().accounting().GpusInUse(t)) << t;
    }
  }
  // Last, the queue emptied and fixed gangs ended, fresh elastic jobs start on
  // what is UP and free; then every node comes back UP and each held elastic
  // job below its most grows by what GrowableNodes offers, and no further.
  for (const JobId& id : pending) {
    ASSERT_TRUE(sched.Cancel(id).ok());
    requests.erase(id);
  }
  pending.clear();
  for (const JobId& id : ledger.All()) {
    if (!requests.at(id).elastic()) {
      ASSERT_EQ(sched.GrowableNodes(id), 0) << id;
      exit_job(id, false);
    }
  }
  for (int i = 0; i < 6; ++i) {  // 192 GPUs asked of at most 160
    JobRequest job = testing::MakeJob(absl::StrCat("e", i), 8, 4, "c", 0);
    job.min_nodes = 1;
    ASSERT_TRUE(sched.Submit(job).ok());
    requests[job.id] = sched.view().job(job.id)->req;
    pending.insert(job.id);
  }
  for (const Decision& d : sched.Schedule()) {
    ASSERT_EQ(d.kind, Decision::Kind::kStart);
    ASSERT_TRUE(pending.erase(d.job));
    ledger.Start(requests.at(d.job), d, state);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (const JobId& id : pending) {  // no room for these at all
    ASSERT_TRUE(sched.Cancel(id).ok());
    requests.erase(id);
  }
  pending.clear();
  for (const auto& [name, spec] : nodes) {
    ASSERT_TRUE(sched.AddNode(spec).ok());
    state[name] = MemberState::kUp;
  }
  for (const JobId& id : ledger.All()) {
    const JobRequest job = requests.at(id);
    const int size = ledger.Size(id);
    const int more = sched.GrowableNodes(id);
    ASSERT_LE(size + more, job.nodes) << id << " would grow past its most";
    ASSERT_LE(more, ledger.NodesWithFree(id, job.gpus_per_node, state)) << id;
    if (size < job.nodes) ++below_most;
    if (more == 0) continue;
    exit_job(id, true);
    auto decisions = sched.Schedule();
    ASSERT_EQ(decisions.size(), 1u) << id;
    ASSERT_EQ(decisions[0].job, id);
    ASSERT_EQ(decisions[0].kind, Decision::Kind::kStart);
    ASSERT_EQ(static_cast<int>(decisions[0].placement.size()), size + more) << id;
    pending.erase(id);
    ledger.Start(job, decisions[0], state);
    if (::testing::Test::HasFatalFailure()) return;
    ++grows;
  }
  *grown += grows;
  std::printf("seed %u: %d elastic below their most at the end, %d grew\n", seed, below_most, grows);
  EXPECT_GT(starts, 500) << "seed " << seed;
  EXPECT_GT(smaller, 0) << "seed " << seed << ": no elastic job started below its most";
  EXPECT_GT(preempts, 5) << "seed " << seed;
}

TEST(SchedulerPropertyTest, InvariantsHoldUnderRandomOperations) {
  int grown = 0;
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(seed);
    RunRandomWorkload(seed, true, &grown);
    RunRandomWorkload(seed, false, &grown);
  }
  EXPECT_GT(grown, 0) << "no elastic job grew in any run";
  std::printf("elastic grows over the 8 runs: %d\n", grown);
}

// Event-driven replay where every job runs exactly its declared limit;
// returns when "G" started. With `elastic`, a third of the multi-node
// background jobs take any size from one node up.
TimePoint TopGangStart(uint32_t seed, bool backfill, bool elastic, int* backfilled) {
  std::mt19937 rng(seed);
  FakeClock clock;
  SchedulerOptions options;
  options.backfill = backfill;
  Scheduler sched(&clock, options);
  for (int i = 0; i < 8; ++i) {
    NodeSpec spec = testing::MakeNode(absl::StrCat("n", i), 4, "H100", absl::StrCat("s", i / 4));
    spec.cpus = 16;
    EXPECT_TRUE(sched.AddNode(spec).ok());
  }
  using Event = std::pair<TimePoint, std::string>;  // completion of a job
  std::priority_queue<Event, std::vector<Event>, std::greater<>> ends;
  std::vector<std::pair<TimePoint, JobRequest>> arrivals;
  auto random_job = [&](const std::string& id, int priority) {
    JobRequest job = testing::MakeJob(id, 1 + (rng() % 4 == 0), 1 + rng() % 4, "t", priority);
    job.cpus_per_node = rng() % 8;
    job.time_limit = seconds(10 + rng() % 500);
    if (elastic && job.nodes > 1 && rng() % 3 == 0) job.min_nodes = 1;
    return job;
  };
  // The background fits at once (8 single-node jobs of <= 4 GPUs on 8 nodes
  // of 4), so both runs are in the same state when G arrives.
  for (int i = 0; i < 8; ++i) {
    JobRequest bg = random_job(absl::StrCat("bg", i), 5);
    bg.nodes = 1;
    bg.cpus_per_node = 0;
    arrivals.emplace_back(TimePoint{}, bg);
  }
  JobRequest gang = testing::MakeJob("G", 6, 4, "t", 10);
  gang.time_limit = seconds(100);
  arrivals.emplace_back(TimePoint{} + seconds(1), gang);
  for (int i = 0; i < 60; ++i) {
    arrivals.emplace_back(TimePoint{} + seconds(2 + rng() % 600), random_job(absl::StrCat("s", i), rng() % 3));
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t next = 0;
  std::optional<TimePoint> gang_start;
  *backfilled = 0;
  while (!gang_start && (next < arrivals.size() || !ends.empty())) {
    TimePoint t = next < arrivals.size() ? arrivals[next].first : TimePoint::max();
    if (!ends.empty()) t = std::min(t, ends.top().first);
    clock.Advance(t - clock.Now());
    while (!ends.empty() && ends.top().first == t) {
      EXPECT_TRUE(sched.OnJobExited(ends.top().second, false).ok());
      ends.pop();
    }
    for (; next < arrivals.size() && arrivals[next].first == t; ++next) {
      EXPECT_TRUE(sched.Submit(arrivals[next].second).ok());
    }
    auto decisions = sched.Schedule();
    if (t == TimePoint{}) {
      EXPECT_EQ(decisions.size(), 8u) << "background did not fit";
    }
    for (const Decision& d : decisions) {
      EXPECT_EQ(d.kind, Decision::Kind::kStart);
      if (d.job == "G") gang_start = t;
      if (d.job[0] == 's' && sched.view().job("G") && sched.view().job("G")->state == QueuedJobState::kPending) {
        ++*backfilled;
      }
      ends.emplace(t + sched.view().job(d.job)->req.time_limit, d.job);
    }
  }
  EXPECT_TRUE(gang_start.has_value());
  return gang_start.value_or(TimePoint::max());
}

TEST(SchedulerPropertyTest, BackfillNeverDelaysTheTopGang) {
  for (bool elastic : {false, true}) {
    SCOPED_TRACE(elastic ? "with elastic jobs" : "fixed gangs only");
    int total_backfilled = 0;
    for (uint32_t seed = 1; seed <= 200; ++seed) {
      int with = 0, without = 0;
      TimePoint on = TopGangStart(seed, true, elastic, &with);
      TimePoint off = TopGangStart(seed, false, elastic, &without);
      ASSERT_LE(on, off) << "seed " << seed;
      EXPECT_EQ(without, 0) << "seed " << seed;
      total_backfilled += with;
    }
    EXPECT_GT(total_backfilled, 200);  // backfill did happen
  }
}

}  // namespace
}  // namespace athanor::sched
