// Billing's ledger, recomputed. A real athanor-coordinator meters a few
// hundred jobs of three tenants on a simulated fleet of mixed GPU models
// (H200, A100, and L40S priced by the default "*") while prices change,
// nodes are lost (an agent stops heartbeating: DOWN, a platform fault) and
// the coordinator is killed (-9) and restarted on its state, 2 to 4 times;
// clients retry with idempotency keys. Jobs are preempted for priority,
// fail and restart, are cancelled, and two interactive allocations are
// reclaimed when idle. Once every job has finished, the ledger (ListLedger)
// must be what ledger_check.h recomputes from the attempts' spans (GetJob),
// the fleet's models and the price book (ListPrices): accruals per key to
// the micro-unit, spans that tile each attempt exactly, refunds of the free
// tenant's platform faults, and every tenant's balance.
//
// The workload comes from a seed, printed first; ATHANOR_TEST_SEED=N draws
// the same one again. A watchdog (SIGALRM) kills the coordinator and fails
// the binary on a hang.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "proto/athanor.grpc.pb.h"
#include "testing/coordinator/coordinator_process.h"
#include "testing/coordinator/retrying_client.h"
#include "testing/coordinator/sim_fleet.h"
#include "testing/coordinator/watchdog.h"
#include "tests/billing_ledger/billing_workload.h"
#include "tests/billing_ledger/ledger_check.h"

namespace athanor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned kWatchdogSeconds = 110;
constexpr auto kRunDeadline = std::chrono::seconds(90);  // every job finished by then
constexpr auto kPoll = std::chrono::milliseconds(50);    // the driver's look at the jobs
constexpr int kJobs = 240;
constexpr int kAgents = 6;
constexpr int kGpusPerAgent = 4;
constexpr int kClients = 3;
constexpr int kWindow = 24;                           // jobs submitted ahead of those finished
constexpr int64_t kCreditMicros = 1'000'000'000'000;  // a million: never runs out
constexpr int64_t kPriceLeadMs = 2000;  // a price change takes effect this long after it is set

struct TenantPlan {
  const char* tenant;
  bool free_platform_faults;
};
constexpr TenantPlan kPlans[] = {{"acme", true}, {"bolt", false}, {"cirrus", false}};

uint64_t TestSeed() {
  const char* env = getenv("ATHANOR_TEST_SEED");
  uint64_t seed = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &seed)) return seed;
  return std::random_device()();
}

int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Finished(rpc::JobState s) {
  return s == rpc::JOB_SUCCEEDED || s == rpc::JOB_FAILED || s == rpc::JOB_CANCELLED;
}

// What the clients were answered and how far the run is; the driver sets
// the jobs finished, the clients wait on it to keep kWindow jobs ahead.
class RunLog {
 public:
  struct Snapshot {
    std::vector<std::string> ids;  // by job index
    std::vector<std::string> failures;
    int acknowledged = 0;
    int retries = 0;
    bool aborted = false;
  };

  explicit RunLog(int jobs) { s_.ids.resize(jobs); }
  void SetFinished(int n) {
    absl::MutexLock lock(&mu_);
    finished_ = n;
  }
  // Blocks until `n` jobs have finished; false when the run was aborted.
  bool AwaitFinished(int n) {
    absl::MutexLock lock(&mu_);
    auto ready = [this, n]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n || s_.aborted; };
    mu_.Await(absl::Condition(&ready));
    return !s_.aborted;
  }
  void Acknowledged(int job, const std::string& id) {
    absl::MutexLock lock(&mu_);
    s_.ids[job] = id;
    ++s_.acknowledged;
  }
  void AddRetries(int n) {
    absl::MutexLock lock(&mu_);
    s_.retries += n;
  }
  // Ends the run: a client failed for good (`why`), or the driver is done ("").
  void Abort(std::string why) {
    absl::MutexLock lock(&mu_);
    if (!why.empty()) s_.failures.push_back(std::move(why));
    s_.aborted = true;
  }
  Snapshot Read() {
    absl::MutexLock lock(&mu_);
    return s_;
  }

 private:
  absl::Mutex mu_;
  Snapshot s_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
};

// One client: submits the jobs c, c + kClients, ... kWindow ahead of those
// finished, and cancels those planned to be, each retried until answered.
void RunClient(int c, const testing::Workload& w, const bench::CoordinatorProcess& coordinator,
               RunLog* log) {
  auto stub = rpc::Coordinator::NewStub(bench::RestartTolerantChannel(coordinator, c));
  std::vector<std::pair<int, int>> cancels;  // job index, due after this many submissions
  auto cancel_due = [&](int submitted) {
    for (auto it = cancels.begin(); it != cancels.end();) {
      if (it->second > submitted) {
        ++it;
        continue;
      }
      rpc::CancelJobRequest req;
      req.set_job_id(log->Read().ids[it->first]);
      rpc::CancelJobResponse resp;
      int retries = 0;
      grpc::Status s = bench::CallUntilAnswered(
          [&](grpc::ClientContext* ctx) { return stub->CancelJob(ctx, req, &resp); }, &retries);
      log->AddRetries(retries);
      if (!s.ok()) log->Abort(absl::StrCat("cancel job ", req.job_id(), ": ", s.error_message()));
      it = cancels.erase(it);
    }
  };
  int submitted = 0;
  for (int j = c; j < static_cast<int>(w.jobs.size()); j += kClients) {
    if (!log->AwaitFinished(j - kWindow)) return;
    const testing::PlannedJob& job = w.jobs[j];
    rpc::SubmitJobResponse resp;
    int retries = 0;
    grpc::Status s = bench::CallUntilAnswered(
        [&](grpc::ClientContext* ctx) { return stub->SubmitJob(ctx, job.request, &resp); },
        &retries);
    log->AddRetries(retries);
    if (!s.ok()) {
      log->Abort(absl::StrCat("submit ", job.request.idempotency_key(), ": ", s.error_message()));
      return;
    }
    log->Acknowledged(j, resp.job_id());
    ++submitted;
    if (job.cancel_after >= 0) cancels.emplace_back(j, submitted + job.cancel_after);
    cancel_due(submitted);
  }
  cancel_due(INT32_MAX);
}

// The test's side of the cluster: the coordinator, its fleet and an admin's
// stubs, and the disruptions it applies.
class Cluster {
 public:
  Cluster(bench::CoordinatorProcess* coordinator, bench::SimFleet* fleet, uint64_t seed)
      : coordinator_(coordinator),
        fleet_(fleet),
        pick_(seed ^ 0x5eed),
        channel_(bench::RestartTolerantChannel(*coordinator, kClients)),
        jobs_(rpc::Coordinator::NewStub(channel_)),
        billing_(rpc::Billing::NewStub(channel_)) {}

  rpc::Coordinator::Stub& jobs() { return *jobs_; }
  rpc::Billing::Stub& billing() { return *billing_; }

  // Jobs finished, or nothing while the coordinator does not answer.
  std::optional<int> FinishedJobs() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    rpc::ListJobsRequest req;
    req.set_all(true);
    rpc::ListJobsResponse resp;
    if (!jobs_->ListJobs(&ctx, req, &resp).ok()) return std::nullopt;
    int n = 0;
    for (const rpc::Job& j : resp.jobs()) n += Finished(j.state()) ? 1 : 0;
    return n;
  }

  absl::Status Kill() {
    coordinator_->Kill();
    absl::Status s = coordinator_->Start();
    bench::WatchCoordinator(coordinator_->pid());
    return s;
  }

  // A node running something stops heartbeating; once it is DOWN, its agent
  // comes back as after a reboot. Waits first for every node to be UP (after
  // a restart they are UNKNOWN until their agents register again).
  absl::Status LoseNode() {
    absl::StatusOr<rpc::ListNodesResponse> nodes =
        AwaitNodes("every node UP", [](const rpc::ListNodesResponse& r) {
          return r.nodes_size() == kAgents &&
                 std::all_of(r.nodes().begin(), r.nodes().end(),
                             [](const rpc::Node& n) { return n.state() == rpc::NODE_UP; });
        });
    if (!nodes.ok()) return nodes.status();
    std::vector<int> busy, up;
    for (int i = 0; i < kAgents; ++i) {
      for (const rpc::Node& n : nodes->nodes()) {
        if (n.name() != fleet_->NodeName(i)) continue;
        up.push_back(i);
        if (!n.jobs().empty()) busy.push_back(i);
      }
    }
    const std::vector<int>& from = busy.empty() ? up : busy;
    const int agent = from[pick_() % from.size()];
    const std::string name = fleet_->NodeName(agent);
    fleet_->Silence(agent);
    nodes = AwaitNodes(absl::StrCat("node ", name, " DOWN"), [&](const rpc::ListNodesResponse& r) {
      return std::any_of(r.nodes().begin(), r.nodes().end(), [&](const rpc::Node& n) {
        return n.name() == name && n.state() == rpc::NODE_DOWN;
      });
    });
    fleet_->Revive(agent);
    return nodes.status();
  }

  // Sets `prices`, effective kPriceLeadMs from now.
  absl::Status ChangePrices(std::vector<billing::Price> prices) {
    const int64_t effective = UnixMsNow() + kPriceLeadMs;
    for (billing::Price& p : prices) {
      p.set_effective_unix_ms(effective);
      if (absl::Status s = SetPrice(p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status SetPrice(const billing::Price& price) {
    rpc::SetPriceRequest req;
    *req.mutable_price() = price;
    rpc::ListPricesResponse resp;
    return Answered("SetPrice",
                    [&](grpc::ClientContext* ctx) { return billing_->SetPrice(ctx, req, &resp); });
  }

  static absl::Status Answered(const std::string& what,
                               const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    grpc::Status s = bench::CallUntilAnswered(call);
    if (s.ok()) return absl::OkStatus();
    return absl::UnknownError(
        absl::StrCat(what, ": code ", s.error_code(), ": ", s.error_message()));
  }

 private:
  // Polls ListNodes until `done` holds (20 s at most).
  absl::StatusOr<rpc::ListNodesResponse> AwaitNodes(
      const std::string& what, const std::function<bool(const rpc::ListNodesResponse&)>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      rpc::ListNodesResponse resp;
      absl::Status s = Answered("ListNodes", [&](grpc::ClientContext* ctx) {
        return jobs_->ListNodes(ctx, rpc::ListNodesRequest(), &resp);
      });
      if (!s.ok()) return s;
      if (done(resp)) return resp;
      if (Clock::now() > deadline)
        return absl::DeadlineExceededError(absl::StrCat("not ", what, " within 20 s"));
      // The state polled is another process's, read over RPC: no event to
      // wait on. Bounded by the deadline.
      std::this_thread::sleep_for(kPoll); /* sleep override */
    }
  }

  bench::CoordinatorProcess* const coordinator_;
  bench::SimFleet* const fleet_;
  std::mt19937_64 pick_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::Coordinator::Stub> jobs_;
  std::unique_ptr<rpc::Billing::Stub> billing_;
};

TEST(BillingLedgerTest, LedgerMatchesRecomputationThroughKillsPriceChangesAndNodeLosses) {
  const uint64_t seed = TestSeed();
  std::cout << "billing ledger test: seed " << seed << " (ATHANOR_TEST_SEED=" << seed
            << " draws this workload again)" << std::endl;
  SCOPED_TRACE(absl::StrCat("ATHANOR_TEST_SEED=", seed));
  bench::ArmWatchdog(kWatchdogSeconds,
                     "\nbilling ledger watchdog: the test hung; killing the coordinator\n");

  testing::WorkloadShape shape;
  shape.jobs = kJobs;
  for (const TenantPlan& p : kPlans) shape.tenants.push_back(p.tenant);
  shape.gpu_models = {"H200", "A100", "L40S"};
  shape.gpus_per_node = kGpusPerAgent;
  const testing::Workload w = testing::DrawWorkload(seed, shape);

  std::string dir;
  absl::StatusOr<bench::CoordinatorProcessOptions> co =
      bench::ScratchCoordinatorOptions("athanor_billing_ledger_test", &dir);
  ASSERT_TRUE(co.ok()) << co.status();
  std::cout << "billing ledger test: the coordinator's state and log in " << dir
            << " (kept when the test fails)" << std::endl;
  // Nodes DOWN 2.5 s after their last heartbeat, accruals every 0.3 s, and
  // preemption, grace and idle reclaim short enough for 0.2-1.5 s jobs.
  co->extra_flags = {"--heartbeat-interval-ms", "200",  "--heartbeat-timeout-s", "2.5",
                     "--billing-interval-s",    "0.3",  "--min-run-time-s",      "0.2",
                     "--default-grace-s",       "1",    "--kill-after-ms",       "500",
                     "--idle-reclaim-grace-s",  "0.5",  "--checkpoint-poll-s",   "0",
                     "--no-metrics"};
  bench::CoordinatorProcess coordinator(*co);
  ASSERT_TRUE(coordinator.Start().ok()) << coordinator.LogTail();
  bench::WatchCoordinator(coordinator.pid());

  bench::SimFleetOptions fo;
  fo.address = coordinator.address();
  fo.agents = kAgents;
  fo.gpus_per_agent = kGpusPerAgent;
  fo.gpu_models = shape.gpu_models;
  fo.rank_plan = testing::RankPlan;
  fo.name_prefix = "ledger-node";
  fo.tls_dir = co->tls_dir;
  bench::SimFleet fleet(fo);
  fleet.Start();
  ASSERT_TRUE(fleet.WaitRegistered(std::chrono::seconds(20))) << coordinator.LogTail();

  // Prices, plans and credit, before any job.
  Cluster cluster(&coordinator, &fleet, seed);
  for (const billing::Price& p : w.prices) ASSERT_TRUE(cluster.SetPrice(p).ok());
  for (const TenantPlan& t : kPlans) {
    rpc::SetPlanRequest plan;
    plan.mutable_plan()->set_tenant(t.tenant);
    plan.mutable_plan()->set_free_platform_faults(t.free_platform_faults);
    rpc::ListPlansResponse plans;
    ASSERT_TRUE(Cluster::Answered("SetPlan", [&](grpc::ClientContext* ctx) {
                  return cluster.billing().SetPlan(ctx, plan, &plans);
                }).ok());
    // Not retried after the call: a second AddCredit would add twice.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::AddCreditRequest credit;
    credit.set_tenant(t.tenant);
    credit.set_amount_micros(kCreditMicros);
    credit.set_note("ledger test");
    rpc::AddCreditResponse added;
    grpc::Status s = cluster.billing().AddCredit(&ctx, credit, &added);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The run: clients submit and cancel; the driver follows the jobs and
  // applies the disruptions as their points come.
  RunLog log(kJobs);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] { RunClient(c, w, coordinator, &log); });
  }
  int kills = 0, node_losses = 0, price_changes = 0, finished = 0;
  size_t next = 0;
  std::vector<std::string> run_errors;
  const auto deadline = Clock::now() + kRunDeadline;
  while (Clock::now() < deadline && run_errors.empty() && !log.Read().aborted) {
    if (std::optional<int> n = cluster.FinishedJobs()) {
      finished = *n;
      log.SetFinished(finished);
    }
    if (log.Read().acknowledged == kJobs && finished == kJobs) break;
    while (next < w.disruptions.size() && finished >= w.disruptions[next].at_finished) {
      const testing::Disruption& d = w.disruptions[next++];
      absl::Status s;
      switch (d.kind) {
        case testing::Disruption::Kind::kKill:
          s = cluster.Kill();
          ++kills;
          break;
        case testing::Disruption::Kind::kNodeLoss:
          s = cluster.LoseNode();
          ++node_losses;
          break;
        case testing::Disruption::Kind::kPriceChange:
          s = cluster.ChangePrices(w.price_changes[d.price_change]);
          ++price_changes;
          break;
      }
      if (!s.ok()) run_errors.push_back(s.ToString());
    }
    // The state polled is another process's, read over RPC: no event to
    // wait on. Bounded by the deadline.
    std::this_thread::sleep_for(kPoll); /* sleep override */
  }
  log.Abort("");  // releases clients still waiting (a failed run)
  for (std::thread& t : clients) t.join();
  const RunLog::Snapshot run = log.Read();
  ASSERT_TRUE(run_errors.empty()) << absl::StrJoin(run_errors, "\n") << "\n"
                                  << coordinator.LogTail();
  ASSERT_TRUE(run.failures.empty()) << absl::StrJoin(run.failures, "\n") << "\n"
                                    << coordinator.LogTail();
  ASSERT_EQ(run.acknowledged, kJobs);
  ASSERT_EQ(finished, kJobs) << "jobs still running " << kRunDeadline.count()
                             << " s into the run:\n"
                             << coordinator.LogTail();

  // What the coordinator says happened, and what it charged.
  testing::BilledWorld world;
  for (const TenantPlan& t : kPlans) {
    world.free_platform_faults[t.tenant] = t.free_platform_faults;
    world.credits[t.tenant] = kCreditMicros;
  }
  for (int i = 0; i < kAgents; ++i) world.model_of_node[fleet.NodeName(i)] = fleet.GpuModel(i);
  rpc::ListPricesResponse prices;
  ASSERT_TRUE(Cluster::Answered("ListPrices", [&](grpc::ClientContext* ctx) {
                return cluster.billing().ListPrices(ctx, rpc::ListPricesRequest(), &prices);
              }).ok());
  world.prices.assign(prices.prices().begin(), prices.prices().end());
  rpc::ListLedgerResponse ledger;
  ASSERT_TRUE(Cluster::Answered("ListLedger", [&](grpc::ClientContext* ctx) {
                return cluster.billing().ListLedger(ctx, rpc::ListLedgerRequest(), &ledger);
              }).ok());
  rpc::ListBalancesResponse balances;
  ASSERT_TRUE(Cluster::Answered("ListBalances", [&](grpc::ClientContext* ctx) {
                return cluster.billing().ListBalances(ctx, rpc::ListBalancesRequest(), &balances);
              }).ok());
  std::map<std::string, int> outcomes;
  int attempts = 0, platform_faults = 0;
  for (const std::string& id : run.ids) {
    rpc::GetJobRequest req;
    req.set_job_id(id);
    rpc::Job job;
    ASSERT_TRUE(Cluster::Answered("GetJob", [&](grpc::ClientContext* ctx) {
                  return cluster.jobs().GetJob(ctx, req, &job);
                }).ok());
    for (const rpc::AttemptNodes& a : job.attempts()) {
      ++attempts;
      ++outcomes[a.outcome()];
      platform_faults += a.platform_fault() ? 1 : 0;
    }
    world.jobs.push_back(std::move(job));
  }

  const std::vector<billing::LedgerEntry> entries(ledger.entries().begin(), ledger.entries().end());
  const testing::LedgerCheck check = testing::CheckLedger(world, entries);
  std::string by_outcome;
  for (const auto& [outcome, n] : outcomes) absl::StrAppend(&by_outcome, " ", outcome, "=", n);
  std::cout << "billing ledger test: seed " << seed << ": " << kJobs << " jobs, " << attempts
            << " attempts (" << check.attempts << " charged;" << by_outcome << "), "
            << platform_faults << " platform faults (" << check.refunded_attempts << " refunded), "
            << entries.size() << " ledger entries (" << check.accruals << " accruals, "
            << check.refunds << " refunds), " << check.keys << " accrual keys; " << kills
            << " kills, " << node_losses << " node losses, " << price_changes << " price changes, "
            << run.retries << " client retries; " << check.mismatches.size() << " mismatches"
            << std::endl;

  EXPECT_TRUE(check.mismatches.empty())
      << check.mismatches.size() << " mismatches between the ledger and its recomputation:\n"
      << check.Listing(20);
  for (const billing::TenantBalance& b : balances.balances()) {
    EXPECT_EQ(b.balance_micros(),
              check.ledger_balance.count(b.tenant()) ? check.ledger_balance.at(b.tenant()) : 0)
        << "ListBalances of " << b.tenant() << " is not the sum of its ledger entries";
  }
  EXPECT_EQ(kills, w.kills);
  EXPECT_EQ(node_losses, w.node_losses);
  EXPECT_EQ(price_changes, static_cast<int>(w.price_changes.size()));
  EXPECT_GT(check.accruals, 0);
  EXPECT_GT(platform_faults, 0) << "no attempt was ended by the platform (node losses)";

  fleet.Stop();
  coordinator.Stop();  // under the watchdog too: a shutdown can hang
  bench::DisarmWatchdog();
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace athanor
