// End to end: a tenant with a small balance runs a checkpointing
// athanor-train job on a two-agent cluster. When a price rise drains its
// credit, it is warned (the rank's log), stopped as a preemption within 60 s
// of the balance reaching zero with its checkpoint committed, and its new
// submissions are held; after `athanor admin credit add` the job resumes from
// that checkpoint and ends with exactly the weights of an uninterrupted run,
// charged exactly the GPU-seconds it held times the price in force.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/athanor.grpc.pb.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

int64_t Ms(double unix_seconds) { return std::llround(unix_seconds * 1000.0); }

// Micro-units for `gpus` GPUs over [from, to) ms at `per_hour` per GPU-hour,
// rounded down (coordinator/billing/meter.h's rule, restated).
int64_t Cost(int64_t per_hour, int gpus, int64_t ms) {
  return static_cast<int64_t>(static_cast<__int128>(gpus) * per_hour * ms / 3600000);
}

TEST(CreditStopTrainTest, OutOfCreditStopsAtACheckpointAndResumesAfterATopUp) {
  LocalCluster cluster({"--min-run-time-s", "0", "--checkpoint-poll-s", "0.2",
                        "--billing-interval-s", "1"});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const std::string bin = std::getenv("ATHANOR_BIN_DIR");
  // 600 steps, slowed so that the run outlasts its credit (timing only: the
  // weights do not depend on it).
  auto train = [&](const std::string& weights) {
    return std::vector<std::string>{bin + "/athanor-train", "--seed", "5", "--hidden", "48",
                                    "--optimizer", "sgd", "--lr", "0.05", "--bucket-mb", "0.05",
                                    "--first-bucket-mb", "0.01", "--timeout-s", "20", "--steps",
                                    "600", "--checkpoint-every", "1", "--inject-slow",
                                    "0:0:1000000:100", "--dump-weights", weights};
  };
  auto submit = [&](const std::string& token, std::vector<std::string> args,
                    const std::vector<std::string>& cmd) {
    args.insert(args.begin(), "submit");
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    CliResult r = token.empty() ? cluster.Cli(args) : cluster.CliAs(token, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  };
  const std::string reference = cluster.dir() + "/reference.safetensors";
  std::string ref = submit("", {"--nodes", "2", "--gpus-per-node", "1", "--checkpoint-uri",
                                "file://" + cluster.dir() + "/store-ref"},
                           train(reference));
  CliResult wait = cluster.Cli({"wait", ref, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + ref + " SUCCEEDED\n") << cluster.CoordinatorLog();
  // Each phase (the reference run, the stop, the resumed run) is bounded by
  // its own waits; the cluster's watchdog covers each one, not their sum.
  LocalCluster::RearmWatchdog();

  // A cheap price, a plan that warns at 0.03 left, 0.05 of credit.
  ASSERT_EQ(cluster.Cli({"admin", "price", "set", "*", "--per-hour", "0.36"}).exit_code, 0);
  CliResult plan = cluster.Cli({"admin", "plan", "set", "acme", "--warn-at", "0.03"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  CliResult credit = cluster.Cli({"admin", "credit", "add", "acme", "0.05", "--note", "prepaid"});
  ASSERT_EQ(credit.exit_code, 0) << credit.err;
  const std::string token = cluster.CreateToken("acme");
  const std::string resumed = cluster.dir() + "/resumed.safetensors";
  std::string victim = submit(token, {"--nodes", "2", "--gpus-per-node", "1", "--grace", "20s",
                                      "--checkpoint-uri", "file://" + cluster.dir() + "/store"},
                              train(resumed));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(victim).committed_step() >= 3; },
                                    std::chrono::seconds(40)))
      << cluster.CoordinatorLog();
  // The price rises 50-fold: 0.05 lasts a few seconds of two GPUs now.
  CliResult rise = cluster.Cli({"admin", "price", "set", "*", "--per-hour", "18"});
  ASSERT_EQ(rise.exit_code, 0) << rise.err;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        rpc::Job j = cluster.GetJob(victim);
        return j.state() == rpc::JOB_PENDING && j.attempts_size() == 1 && j.attempts(0).end_unix() > 0;
      },
      std::chrono::seconds(90)))
      << cluster.CoordinatorLog();
  rpc::Job stopped = cluster.GetJob(victim);
  EXPECT_EQ(stopped.restarts(), 0);
  EXPECT_EQ(stopped.attempts(0).outcome(), "preempted");
  EXPECT_EQ(stopped.attempts(0).end_reason(), "stopped: tenant acme is out of credit");
  EXPECT_GE(stopped.committed_step(), 3);
  // Warned first, in the rank's own log.
  const std::string log1 = ReadFile(absl::StrCat(cluster.dir(), "/", stopped.attempts(0).nodes(0),
                                                 "/jobs/", victim, "/attempt-1/rank-0.log"));
  EXPECT_NE(log1.find("athanor: credit low: tenant acme has "), std::string::npos) << log1;
  EXPECT_NE(log1.find("athanor: out of credit: tenant acme has "), std::string::npos) << log1;
  // New work is held, and says why.
  std::string later = submit(token, {"--nodes", "1", "--gpus-per-node", "1"}, {"sh", "-c", "echo later"});
  CliResult why = cluster.CliAs(token, {"why", later});
  EXPECT_NE(why.out.find("held: tenant acme is out of credit"), std::string::npos) << why.out;
  EXPECT_EQ(cluster.GetJob(later).state(), rpc::JOB_PENDING);

  // Stopped within 60 s of the balance reaching zero: the first accrual that
  // took the running balance to zero or below ends when it did.
  auto billing_stub = cluster.BillingStubAs(cluster.admin_token());
  auto ledger = [&] {
    grpc::ClientContext ctx;
    rpc::ListLedgerRequest req;
    req.set_tenant("acme");
    rpc::ListLedgerResponse resp;
    grpc::Status s = billing_stub->ListLedger(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };
  int64_t running = 0, zero_at = 0;
  const rpc::ListLedgerResponse at_stop = ledger();
  for (const billing::LedgerEntry& e : at_stop.entries()) {
    running += e.amount_micros();
    if (running <= 0 && zero_at == 0 && e.kind() == billing::ACCRUAL) zero_at = e.span_end_unix_ms();
  }
  ASSERT_GT(zero_at, 0);
  EXPECT_LT(Ms(stopped.attempts(0).end_unix()) - zero_at, 60000);
  std::cerr << "stopped " << Ms(stopped.attempts(0).end_unix()) - zero_at
            << " ms after the balance reached zero\n";

  // A top-up releases both jobs; the victim resumes where it stopped.
  LocalCluster::RearmWatchdog();
  credit = cluster.Cli({"admin", "credit", "add", "acme", "100", "--note", "top-up"});
  ASSERT_EQ(credit.exit_code, 0) << credit.err;
  wait = cluster.Cli({"wait", victim, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + victim + " SUCCEEDED\n") << cluster.CoordinatorLog();
  wait = cluster.Cli({"wait", later, "--timeout", "60"});
  ASSERT_EQ(wait.out, "job " + later + " SUCCEEDED\n") << cluster.CoordinatorLog();
  EXPECT_EQ(ReadFile(resumed), ReadFile(reference)) << "weights differ from the uninterrupted run";
  EXPECT_FALSE(ReadFile(reference).empty());

  // Charged exactly the GPU-seconds held times the price in force: 0.36 per
  // GPU-hour until the rise, 18 from it.
  grpc::ClientContext pctx;
  rpc::ListPricesResponse prices;
  ASSERT_TRUE(billing_stub->ListPrices(&pctx, rpc::ListPricesRequest(), &prices).ok());
  ASSERT_EQ(prices.prices_size(), 2);
  const int64_t rise_at = prices.prices(1).effective_unix_ms();
  int64_t expected = 0;
  rpc::Job done = cluster.GetJob(victim);
  for (const rpc::AttemptNodes& a : done.attempts()) {
    const int64_t s = Ms(a.start_unix()), e = Ms(a.end_unix());
    const int gpus = a.nodes_size();  // one GPU each
    const int64_t cut = std::clamp(rise_at, s, e);
    expected += Cost(360000, gpus, cut - s) + Cost(18000000, gpus, e - cut);
  }
  int64_t charged = 0;
  const rpc::ListLedgerResponse at_end = ledger();
  for (const billing::LedgerEntry& e : at_end.entries()) {
    if (e.kind() == billing::ACCRUAL && e.job_id() == victim) charged -= e.amount_micros();
  }
  EXPECT_EQ(charged, expected);
  std::cerr << "victim charged " << charged << " micro-units over " << done.attempts_size()
            << " attempts\n";
}

}  // namespace
}  // namespace athanor::testing
