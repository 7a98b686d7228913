#include "tests/billing_ledger/billing_workload.h"

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace athanor::testing {
namespace {

constexpr char kRunMs[] = "SIM_RUN_MS";
constexpr char kFailFirst[] = "SIM_FAIL_FIRST";
constexpr int kInteractive = 2;

class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }

 private:
  std::mt19937_64 rng_;
};

// Odd amounts, so that rounding to the micro-unit matters.
billing::Price DrawPrice(Draw& d, const std::string& model) {
  billing::Price p;
  p.set_gpu_model(model);
  p.set_gpu_hour_micros(d.Uniform(1'000'003, 5'999'999));
  p.set_cpu_hour_micros(d.Uniform(0, 60'000));
  p.set_memory_gib_hour_micros(d.Uniform(0, 12'000));
  return p;
}

PlannedJob DrawJob(Draw& d, uint64_t seed, int index, const WorkloadShape& shape) {
  PlannedJob job;
  rpc::SubmitJobRequest& req = job.request;
  req.set_idempotency_key(absl::StrCat("ledger-", seed, "-", index));
  rpc::JobSpec* spec = req.mutable_spec();
  spec->set_name(absl::StrCat("ledger-", index));
  spec->set_tenant(shape.tenants[d.Uniform(0, static_cast<int64_t>(shape.tenants.size()) - 1)]);
  spec->add_command("sim");
  spec->set_nodes(d.Chance(30) ? 2 : 1);
  spec->set_gpus_per_node(static_cast<int32_t>(d.Uniform(1, shape.gpus_per_node)));
  if (d.Chance(50)) spec->set_cpus_per_node(static_cast<int32_t>(d.Uniform(1, 24)));
  if (d.Chance(50)) spec->set_memory_mb_per_node(d.Uniform(1, 256 * 1024));
  spec->set_max_restarts(2);
  int64_t run_ms = d.Uniform(150, 900);
  const int64_t kind = d.Uniform(0, 99);
  if (kind < 12) {  // urgent: preempts preemptible work when it does not fit
    spec->set_priority(10);
    run_ms = d.Uniform(150, 500);
  } else if (kind < 60) {  // long and preemptible
    spec->set_preemptible(true);
    run_ms = d.Uniform(400, 1500);
  }
  (*spec->mutable_env())[kRunMs] = absl::StrCat(run_ms);
  if (d.Chance(6)) spec->mutable_env()->insert({kFailFirst, std::string("1")});
  if (d.Chance(8)) job.cancel_after = static_cast<int>(d.Uniform(0, 3));
  return job;
}

}  // namespace

Workload DrawWorkload(uint64_t seed, const WorkloadShape& shape) {
  Draw d(seed);
  Workload w;
  const int n = shape.jobs;
  for (int i = 0; i < n; ++i) w.jobs.push_back(DrawJob(d, seed, i, shape));
  // Interactive allocations that never exit: reclaimed once idle.
  for (int k = 0; k < kInteractive; ++k) {
    rpc::JobSpec* spec = w.jobs[d.Uniform(n / 4, 3 * n / 4)].request.mutable_spec();
    spec->set_interactive(true);
    spec->set_idle_timeout_s(1);
    spec->set_nodes(1);
    spec->set_preemptible(false);
    spec->set_priority(0);
    spec->mutable_env()->erase(kFailFirst);
    (*spec->mutable_env())[kRunMs] = absl::StrCat(600'000);
  }

  // Every model but the last has a price of its own; the last is charged at
  // the default's. The first change moves the default and the first model,
  // the second the second model alone, the third the default alone: the
  // default's changes cut the spans of models with prices of their own
  // without changing what they are charged.
  const std::vector<std::string>& models = shape.gpu_models;
  for (size_t m = 0; m + 1 < models.size(); ++m) w.prices.push_back(DrawPrice(d, models[m]));
  w.prices.push_back(DrawPrice(d, "*"));
  w.price_changes.push_back({DrawPrice(d, "*"), DrawPrice(d, models[0])});
  if (models.size() > 2) w.price_changes.push_back({DrawPrice(d, models[1])});
  w.price_changes.push_back({DrawPrice(d, "*")});

  using Kind = Disruption::Kind;
  w.kills = static_cast<int>(d.Uniform(2, 4));
  w.node_losses = 2;
  for (int k = 0; k < w.kills; ++k) {
    w.disruptions.push_back({Kind::kKill, static_cast<int>(d.Uniform(n / 10, 9 * n / 10))});
  }
  for (int k = 0; k < w.node_losses; ++k) {
    w.disruptions.push_back({Kind::kNodeLoss, static_cast<int>(d.Uniform(n / 5, 4 * n / 5))});
  }
  for (size_t c = 0; c < w.price_changes.size(); ++c) {  // from 15%, 40%, 65% of the jobs
    const int from = static_cast<int>((15 + 25 * c) * n / 100);
    w.disruptions.push_back(
        {Kind::kPriceChange, static_cast<int>(d.Uniform(from, from + n / 5)), static_cast<int>(c)});
  }
  std::stable_sort(
      w.disruptions.begin(), w.disruptions.end(),
      [](const Disruption& a, const Disruption& b) { return a.at_finished < b.at_finished; });
  return w;
}

bench::SimRankPlan RankPlan(const rpc::RankSpec& rank) {
  bench::SimRankPlan plan;
  plan.run_time = std::chrono::milliseconds(300);
  int64_t ms = 0;
  auto it = rank.env().find(kRunMs);
  if (it != rank.env().end() && absl::SimpleAtoi(it->second, &ms)) {
    plan.run_time = std::chrono::milliseconds(ms);
  }
  if (rank.env().count(kFailFirst) && rank.attempt() == 1 && rank.rank() == 0) plan.exit_code = 1;
  return plan;
}

}  // namespace athanor::testing
