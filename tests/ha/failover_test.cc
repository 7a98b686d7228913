// Coordinators on etcd, under failures. Failover: a real 3-member etcd
// cluster on loopback, three athanor-coordinator processes on it (one leads,
// two wait as standbys that only name the leader), a fleet of simulated agents and a submission storm whose
// clients dial all three addresses and retry with idempotency keys. The
// leader is killed with SIGKILL ten times (each time restarted as a
// standby). Afterwards:
//   - every acknowledged submission exists exactly once, under the id it was
//     acknowledged with, and a deliberate retry of every key is a duplicate;
//   - a job that was running throughout was never restarted: its only rank
//     started once, and the job is still RUNNING in its first attempt;
//   - each failover's unavailability window for submissions (from the kill to
//     the first submission acknowledged by the next leader) is printed, with
//     its p50 and p99 (docs/benchmarks.md keeps the figures; no timed assert).
// Member loss: one coordinator on the same kind of cluster while etcd's Raft
// leader is killed and restarted under the storm: nothing acknowledged is
// lost and submissions go on.
//
// A watchdog (SIGALRM) fails the binary if anything hangs; every child
// process dies with the test's thread (PR_SET_PDEATHSIG).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_channel.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "proto/athanor.grpc.pb.h"
#include "testing/coordinator/coordinator_process.h"
#include "testing/coordinator/retrying_client.h"
#include "testing/coordinator/sim_fleet.h"
#include "testing/coordinator/watchdog.h"
#include "coordinator/store/etcd/etcd_client.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCoordinators = 3;
constexpr int kFailovers = 10;
constexpr int kClients = 4;
constexpr int kAcksBetweenKills = 40;
constexpr unsigned kWatchdogSeconds = 240;
// The coordinators' lease; ATHANOR_HA_LEASE_S (1..10) overrides it for a
// measurement of another lease (docs/benchmarks.md).
int LeaderTtlSeconds() {
  const char* v = getenv("ATHANOR_HA_LEASE_S");
  int s = 0;
  if (v != nullptr && absl::SimpleAtoi(v, &s) && s >= 1 && s <= 10) return s;
  return 1;
}

rpc::SubmitJobRequest Request(const std::string& key) {
  rpc::SubmitJobRequest req;
  req.set_idempotency_key(key);
  rpc::JobSpec* spec = req.mutable_spec();
  spec->set_name(key);
  spec->set_tenant("ha");
  spec->set_nodes(1);
  spec->set_gpus_per_node(1);
  spec->add_command("true");
  return req;
}

// What the storm's clients were answered, and when.
class Answers {
 public:
  // `peer`: who answered (grpc::ClientContext::peer(), "ipv4:HOST:PORT").
  void Record(const std::string& key, const std::string& id, const std::string& peer = "") {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = ids_.emplace(key, id);
    if (!inserted && it->second != id) conflicts_.push_back(absl::StrCat(key, ": ", it->second, " then ", id));
    if (inserted) {
      ++acknowledged_;
      last_ack_[peer] = Clock::now();
    }
  }
  void AddFailure(std::string what) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(std::move(what));
  }
  // Blocks until `n` keys in all were acknowledged, or a submission failed
  // for good, or `timeout` passes. True in the first case.
  bool AwaitAcknowledged(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return acknowledged_ >= n || !failures_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
    return acknowledged_ >= n;
  }
  // Blocks until a key is acknowledged after `since` by another coordinator
  // than `not_by` (an answer of the killed leader read just after its kill
  // is not the next leader's); that time, or nullopt after `timeout`.
  std::optional<Clock::time_point> AwaitAckAfter(Clock::time_point since, const std::string& not_by,
                                                 absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    std::optional<Clock::time_point> first;
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [peer, at] : last_ack_) {
        if (peer != not_by && at > since) {
          first = at;
          return true;
        }
      }
      return false;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) return std::nullopt;
    return first;
  }
  int acknowledged() {
    absl::MutexLock lock(&mu_);
    return acknowledged_;
  }
  std::map<std::string, std::string> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }
  std::vector<std::string> conflicts() {
    absl::MutexLock lock(&mu_);
    return conflicts_;
  }
  std::vector<std::string> failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> conflicts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  int acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Clock::time_point> last_ack_ ABSL_GUARDED_BY(mu_);  // by who answered
};

// Every coordinator's address, as a list (`--coordinator a,b,c`): the
// channel calls the one whose health says it leads and follows the lead
// (common/coordinator_targets.h), as agents and the CLI do.
std::string AllCoordinators(const std::vector<std::unique_ptr<bench::CoordinatorProcess>>& cs) {
  std::vector<std::string> addresses;
  for (const auto& c : cs) addresses.push_back(c->address());
  return absl::StrJoin(addresses, ",");
}

std::shared_ptr<grpc::Channel> FollowingChannel(const std::string& list, const std::string& tls_dir, int index) {
  grpc::ChannelArguments args;  // reconnect at once to a restarted member
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("athanor.test.client", index);
  args.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> creds = bench::BenchCredentials(tls_dir, &args);
  absl::StatusOr<std::string> target = CoordinatorDialTarget(list, &args);
  EXPECT_TRUE(target.ok()) << target.status();
  return grpc::CreateCustomChannel(target.value_or(list), creds, args);
}

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// The `athanor` CLI beside the coordinator binary, as the admin (TLS, the
// bootstrap token from a file), with `--coordinator` set to `coordinators`.
CliRun RunCli(const std::string& coordinators, const std::string& tls_dir, const std::vector<std::string>& args) {
  SubprocessOptions o;
  std::string bin = bench::DefaultCoordinatorBinary();
  bin = bin.substr(0, bin.size() - std::string("-coordinator").size());
  o.argv = {bin, "--coordinator", coordinators, "--ca", tls_dir + "/ca.crt"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.env["ATHANOR_TOKEN_FILE"] = tls_dir + "/admin.token";
  o.capture_stdout = true;
  o.stderr_path = "=stdout";
  o.parent_death_signal = SIGKILL;
  CliRun r;
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  if (!p.ok()) {
    r.out = std::string(p.status().message());
    return r;
  }
  r.out = (*p)->ReadAllStdout();
  r.exit_code = (*p)->Wait().exit_code;
  return r;
}

// Which coordinator answers (the leader): polls each one's own address until
// exactly one answers, or `timeout` passes (-1).
int FindLeader(const std::vector<std::unique_ptr<bench::CoordinatorProcess>>& cs, const std::string& tls_dir,
               std::chrono::seconds timeout) {
  std::vector<std::unique_ptr<rpc::Coordinator::Stub>> stubs;
  for (const auto& c : cs) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
    std::shared_ptr<grpc::ChannelCredentials> creds = bench::BenchCredentials(tls_dir, &args);
    stubs.push_back(rpc::Coordinator::NewStub(grpc::CreateCustomChannel(c->address(), creds, args)));
  }
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int answered = -1, count = 0;
    for (size_t i = 0; i < stubs.size(); ++i) {
      grpc::ClientContext ctx;
      // Each probe waits up to 200 ms for a connection: the loop does not spin.
      ctx.set_wait_for_ready(true);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      rpc::ListNodesResponse resp;
      if (stubs[i]->ListNodes(&ctx, rpc::ListNodesRequest(), &resp).ok()) {
        answered = static_cast<int>(i);
        ++count;
      }
    }
    if (count == 1) return answered;
  }
  return -1;
}

// Every acknowledged key is exactly one job, under the id it was
// acknowledged with, and nothing else is listed but `others` jobs.
void ExpectOneJobPerKey(rpc::Coordinator::Stub* admin, Answers& answers, int others) {
  rpc::ListJobsRequest list;
  list.set_all(true);
  rpc::ListJobsResponse jobs;
  grpc::Status s = bench::CallUntilAnswered([&](grpc::ClientContext* ctx) { return admin->ListJobs(ctx, list, &jobs); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::map<std::string, std::vector<std::string>> ids_by_name;
  for (const rpc::Job& j : jobs.jobs()) ids_by_name[j.spec().name()].push_back(j.id());
  std::vector<std::string> wrong;
  const std::map<std::string, std::string> acknowledged = answers.ids();
  for (const auto& [key, id] : acknowledged) {
    const std::vector<std::string>& listed = ids_by_name[key];
    if (listed.size() != 1 || listed[0] != id) {
      wrong.push_back(absl::StrCat(key, ": acknowledged as ", id, ", listed ", absl::StrJoin(listed, ",")));
    }
  }
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " keys do not map to exactly one job:\n"
                             << absl::StrJoin(wrong.begin(), wrong.begin() + std::min<size_t>(10, wrong.size()), "\n");
  EXPECT_EQ(jobs.jobs_size(), static_cast<int>(acknowledged.size()) + others) << "jobs listed besides one per key";
}

// Submission clients: each submits one-node jobs under keys of its own
// (ha-<client>-<i>) until stopped, retrying each until answered, and records
// who acknowledged what.
class Storm {
 public:
  Storm(const std::string& target, const std::string& tls_dir, int clients, Answers* answers) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, target, tls_dir, c, answers] {
        std::unique_ptr<rpc::Coordinator::Stub> stub = rpc::Coordinator::NewStub(FollowingChannel(target, tls_dir, c));
        for (int i = 0; !stop_.load(); ++i) {
          const std::string key = absl::StrCat("ha-", c, "-", i);
          rpc::SubmitJobRequest req = Request(key);
          rpc::SubmitJobResponse resp;
          std::string peer;
          grpc::Status s = bench::CallUntilAnswered(
              [&](grpc::ClientContext* ctx) {
                grpc::Status answer = stub->SubmitJob(ctx, req, &resp);
                peer = ctx->peer();
                return answer;
              },
              nullptr, {.max_attempts = 400, .per_attempt = std::chrono::milliseconds(2000)});
          if (s.ok()) {
            answers->Record(key, resp.job_id(), peer);
          } else {
            answers->AddFailure(absl::StrCat(key, ": code ", s.error_code(), ": ", s.error_message()));
            return;
          }
        }
      });
    }
  }
  ~Storm() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * v.size())) - 1;
  return v[std::min(i, v.size() - 1)];
}

TEST(CoordinatorFailoverTest, KillingTheLeaderTenTimesLosesNothingAndRestartsNoRank) {
  bench::ArmWatchdog(kWatchdogSeconds, "\nfailover watchdog: the test hung\n");
  std::string dir;
  absl::StatusOr<bench::CoordinatorProcessOptions> base = bench::ScratchCoordinatorOptions("athanor_ha_test", &dir);
  ASSERT_TRUE(base.ok()) << base.status();

  absl::StatusOr<std::unique_ptr<testing_etcd::EtcdCluster>> etcd =
      testing_etcd::EtcdCluster::Start(3, dir + "/etcd");
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string state = (*etcd)->uri("athanor-ha");

  std::vector<std::unique_ptr<bench::CoordinatorProcess>> coordinators;
  for (int i = 0; i < kCoordinators; ++i) {
    bench::CoordinatorProcessOptions o = *base;
    if (i > 0) {
      absl::StatusOr<int> port = PickFreePort();
      ASSERT_TRUE(port.ok()) << port.status();
      o.port = *port;
    }
    o.state_path = state;
    o.log_path = absl::StrCat(dir, "/coordinator-", i, ".log");
    // The test's etcd members take 4096 operations a transaction (testing/etcd).
    o.extra_flags = {"--local-dir", absl::StrCat(dir, "/local-", i), "--etcd-lease-ttl-s",
                     std::to_string(LeaderTtlSeconds()), "--etcd-max-txn-ops", "4096"};
    coordinators.push_back(std::make_unique<bench::CoordinatorProcess>(o));
    ASSERT_TRUE(coordinators.back()->Launch().ok());
  }
  auto logs = [&] {
    std::string all;
    for (const auto& c : coordinators) absl::StrAppend(&all, "--- ", c->address(), "\n", c->LogTail(3000));
    return all;
  };
  int leader = FindLeader(coordinators, base->tls_dir, std::chrono::seconds(30));
  ASSERT_GE(leader, 0) << "no single coordinator leads:\n" << logs();
  const std::string target = AllCoordinators(coordinators);
  // Leadership changes as the metric counts them: each new leader adds its
  // term to PREFIX/terms before it serves.
  absl::StatusOr<coord::etcd::EtcdUri> uri = coord::etcd::ParseEtcdUri(state);
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<std::unique_ptr<coord::etcd::EtcdClient>> etcd_client = coord::etcd::EtcdClient::Create(*uri);
  ASSERT_TRUE(etcd_client.ok()) << etcd_client.status();
  auto terms_counted = [&]() -> int64_t {
    absl::StatusOr<coord::etcd::RangeResult> r = (*etcd_client)->Range("/athanor-ha/terms");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->kvs.size() == 1 ? std::stoll(r->kvs[0].value) : -1;
  };
  int64_t terms = terms_counted();
  EXPECT_EQ(terms, 1);

  // The fleet follows the leader like real agents; one job runs throughout.
  std::string long_job;
  std::atomic<int> long_starts{0};
  bench::SimFleetOptions fo;
  fo.address = target;
  fo.agents = 4;
  fo.tls_dir = base->tls_dir;
  fo.name_prefix = "ha-node";
  fo.rank_plan = [&](const rpc::RankSpec& spec) {
    if (spec.env().contains("HA_LONG")) {
      long_starts.fetch_add(1);
      return bench::SimRankPlan{std::chrono::hours(1), 0};
    }
    return bench::SimRankPlan{std::chrono::milliseconds(100), 0};
  };
  bench::SimFleet fleet(fo);
  fleet.Start();
  ASSERT_TRUE(fleet.WaitRegistered(std::chrono::seconds(30))) << logs();

  // The CLI given every coordinator reaches the leader; given a standby
  // alone, it is told which one leads.
  {
    CliRun listed = RunCli(target, base->tls_dir, {"nodes", "--json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.out;
    for (int i = 0; i < fo.agents; ++i) {
      EXPECT_NE(listed.out.find(absl::StrFormat("\"ha-node-%05d\"", i)), std::string::npos) << listed.out;
    }
    const int standby = (leader + 1) % kCoordinators;
    CliRun alone = RunCli(coordinators[standby]->address(), base->tls_dir, {"nodes"});
    EXPECT_NE(alone.exit_code, 0) << alone.out;
    EXPECT_NE(alone.out.find(absl::StrCat("this coordinator is a standby; the leader is ",
                                          coordinators[leader]->address(), " (term ")),
              std::string::npos)
        << alone.out;
  }

  std::unique_ptr<rpc::Coordinator::Stub> admin = rpc::Coordinator::NewStub(FollowingChannel(target, base->tls_dir, 99));
  {
    rpc::SubmitJobRequest req = Request("long-running");
    (*req.mutable_spec()->mutable_env())["HA_LONG"] = "1";
    rpc::SubmitJobResponse resp;
    grpc::Status s = bench::CallUntilAnswered([&](grpc::ClientContext* ctx) { return admin->SubmitJob(ctx, req, &resp); });
    ASSERT_TRUE(s.ok()) << s.error_message();
    long_job = resp.job_id();
  }
  // It runs before the first kill.
  auto job_state = [&](const std::string& id) {
    rpc::GetJobRequest req;
    req.set_job_id(id);
    rpc::Job job;
    grpc::Status s = bench::CallUntilAnswered([&](grpc::ClientContext* ctx) { return admin->GetJob(ctx, req, &job); });
    return s.ok() ? job : rpc::Job();
  };
  for (int i = 0; i < 100 && job_state(long_job).state() != rpc::JOB_RUNNING; ++i) {
    // The job goes RUNNING on the fleet's next heartbeat; poll its state.
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); /* sleep override */
  }
  ASSERT_EQ(job_state(long_job).state(), rpc::JOB_RUNNING) << logs();

  Answers answers;
  Storm storm(target, base->tls_dir, kClients, &answers);

  std::vector<double> windows_s;
  for (int k = 0; k < kFailovers; ++k) {
    ASSERT_TRUE(answers.AwaitAcknowledged(answers.acknowledged() + kAcksBetweenKills, absl::Seconds(30)))
        << "failover " << k << ": the storm stalled\n" << logs() << absl::StrJoin(answers.failures(), "\n");
    const Clock::time_point killed = Clock::now();
    coordinators[leader]->Kill();
    std::optional<Clock::time_point> back =
        answers.AwaitAckAfter(killed, absl::StrCat("ipv4:", coordinators[leader]->address()), absl::Seconds(30));
    ASSERT_TRUE(back.has_value()) << "failover " << k << ": no submission answered within 30 s of the kill\n"
                                  << logs();
    windows_s.push_back(std::chrono::duration<double>(*back - killed).count());
    ASSERT_TRUE(coordinators[leader]->Launch().ok());  // back as a standby
    // As a supervisor would: a coordinator that exited by itself (status 3,
    // a lead it could no longer be sure of) stands again.
    for (auto& c : coordinators) {
      if (!c->Running()) {
        ASSERT_TRUE(c->Launch().ok());
      }
    }
    leader = FindLeader(coordinators, base->tls_dir, std::chrono::seconds(30));
    ASSERT_GE(leader, 0) << "failover " << k << ": no single coordinator leads\n" << logs();
    const int64_t now_terms = terms_counted();
    EXPECT_GT(now_terms, terms) << "failover " << k << ": the new leader's term was not counted";
    terms = now_terms;
  }
  storm.Stop();
  EXPECT_TRUE(answers.failures().empty()) << absl::StrJoin(answers.failures(), "\n");

  std::vector<std::string> shown;
  for (double w : windows_s) shown.push_back(absl::StrFormat("%.2f", w));
  std::printf("failover windows (s): %s\np50 %.2f s, p99 %.2f s, max %.2f s over %zu failovers, %d submissions\n",
              absl::StrJoin(shown, " ").c_str(), Percentile(windows_s, 0.5), Percentile(windows_s, 0.99),
              *std::max_element(windows_s.begin(), windows_s.end()), windows_s.size(), answers.acknowledged());

  // A deliberate retry of every key: the first job again, never a second.
  std::vector<std::string> not_duplicate;
  for (const auto& [key, id] : answers.ids()) {
    rpc::SubmitJobRequest req = Request(key);
    rpc::SubmitJobResponse resp;
    grpc::Status s = bench::CallUntilAnswered([&](grpc::ClientContext* ctx) { return admin->SubmitJob(ctx, req, &resp); });
    ASSERT_TRUE(s.ok()) << key << ": " << s.error_message();
    answers.Record(key, resp.job_id());
    if (!resp.duplicate()) not_duplicate.push_back(key);
  }
  EXPECT_TRUE(answers.conflicts().empty()) << absl::StrJoin(answers.conflicts(), "\n");
  EXPECT_TRUE(not_duplicate.empty()) << "retries not marked duplicate: " << absl::StrJoin(not_duplicate, " ");

  // The leader's view: one job per key, under the acknowledged id.
  ExpectOneJobPerKey(admin.get(), answers, /*others=*/1);

  // The long job was never restarted by ten failovers.
  rpc::Job long_now = job_state(long_job);
  EXPECT_EQ(long_now.state(), rpc::JOB_RUNNING);
  EXPECT_EQ(long_now.attempt(), 1);
  EXPECT_EQ(long_now.restarts(), 0);
  EXPECT_EQ(long_starts.load(), 1) << "the long job's rank was started again";

  bench::DisarmWatchdog();
  fleet.Stop();
  for (auto& c : coordinators) c->Stop();
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// Loss of one etcd member under load: the storm goes on against one
// coordinator while etcd's Raft leader is killed with SIGKILL, then started
// again. The coordinator keeps its lead (its client moves to the other
// members), no acknowledged submission is lost, and submissions go on; the
// stall (kill to the next acknowledgement) is printed.
TEST(CoordinatorFailoverTest, LosingAnEtcdMemberUnderLoadLosesNothing) {
  bench::ArmWatchdog(kWatchdogSeconds, "\netcd member loss watchdog: the test hung\n");
  std::string dir;
  absl::StatusOr<bench::CoordinatorProcessOptions> base =
      bench::ScratchCoordinatorOptions("athanor_ha_member_test", &dir);
  ASSERT_TRUE(base.ok()) << base.status();
  absl::StatusOr<std::unique_ptr<testing_etcd::EtcdCluster>> etcd =
      testing_etcd::EtcdCluster::Start(3, dir + "/etcd");
  ASSERT_TRUE(etcd.ok()) << etcd.status();

  bench::CoordinatorProcessOptions o = *base;
  o.state_path = (*etcd)->uri("athanor-ha-member");
  o.log_path = dir + "/coordinator.log";
  o.extra_flags = {"--local-dir", dir + "/local", "--etcd-max-txn-ops", "4096"};
  bench::CoordinatorProcess coordinator(o);
  ASSERT_TRUE(coordinator.Start().ok());  // alone, it leads at once
  const std::string target = coordinator.address();
  std::unique_ptr<rpc::Coordinator::Stub> admin = rpc::Coordinator::NewStub(FollowingChannel(target, base->tls_dir, 99));
  bench::SimFleetOptions fo;  // nodes the jobs fit on (each runs 100 ms)
  fo.address = target;
  fo.agents = 2;
  fo.tls_dir = base->tls_dir;
  fo.name_prefix = "ha-member-node";
  fo.run_time = std::chrono::milliseconds(100);
  bench::SimFleet fleet(fo);
  fleet.Start();
  ASSERT_TRUE(fleet.WaitRegistered(std::chrono::seconds(30))) << coordinator.LogTail();

  Answers answers;
  Storm storm(target, base->tls_dir, kClients, &answers);
  ASSERT_TRUE(answers.AwaitAcknowledged(200, absl::Seconds(30)))
      << absl::StrJoin(answers.failures(), "\n") << coordinator.LogTail();

  // Kill etcd's Raft leader: the worst member to lose (a new election).
  absl::StatusOr<coord::etcd::EtcdUri> uri = coord::etcd::ParseEtcdUri((*etcd)->uri("athanor-ha-member"));
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<std::unique_ptr<coord::etcd::EtcdClient>> client = coord::etcd::EtcdClient::Create(*uri);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::vector<coord::etcd::MemberStatus>> members = (*client)->Members();
  ASSERT_TRUE(members.ok()) << members.status();
  int raft_leader = -1;
  for (size_t i = 0; i < members->size(); ++i) {
    if ((*members)[i].is_leader) raft_leader = std::stoi((*members)[i].name.substr(1));  // "m<i>"
  }
  ASSERT_GE(raft_leader, 0);
  const int before = answers.acknowledged();
  const Clock::time_point killed = Clock::now();
  ASSERT_TRUE((*etcd)->Kill(raft_leader).ok());
  std::optional<Clock::time_point> next = answers.AwaitAckAfter(killed, "", absl::Seconds(30));
  ASSERT_TRUE(next.has_value()) << "no submission answered within 30 s of losing a member\n" << coordinator.LogTail();
  ASSERT_TRUE(answers.AwaitAcknowledged(before + 200, absl::Seconds(30)))
      << "submissions stalled on two members\n" << coordinator.LogTail();
  const int on_two = answers.acknowledged() - before;
  ASSERT_TRUE((*etcd)->Restart(raft_leader).ok());
  ASSERT_TRUE(answers.AwaitAcknowledged(answers.acknowledged() + 100, absl::Seconds(30))) << coordinator.LogTail();
  storm.Stop();
  EXPECT_TRUE(answers.failures().empty()) << absl::StrJoin(answers.failures(), "\n");
  EXPECT_TRUE(coordinator.Running()) << "the coordinator lost its lead with one member down\n" << coordinator.LogTail();
  std::printf("etcd member m%d (Raft leader) killed: next submission acknowledged after %.2f s; %d acknowledged "
              "on two members; %d in all\n",
              raft_leader, std::chrono::duration<double>(*next - killed).count(), on_two, answers.acknowledged());

  EXPECT_TRUE(answers.conflicts().empty()) << absl::StrJoin(answers.conflicts(), "\n");
  ExpectOneJobPerKey(admin.get(), answers, /*others=*/0);

  bench::DisarmWatchdog();
  fleet.Stop();
  coordinator.Stop();
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace athanor
