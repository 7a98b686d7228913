// Crash under load: a real athanor-coordinator is killed with SIGKILL in the
// middle of a submission storm whose clients retry with their idempotency keys
// until answered, then restarted on the same state and port. Afterwards:
//   - every acknowledged job exists exactly once, under the id it was acknowledged with;
//   - a key is never answered with two different job ids (a deliberate retry of
//     every key after the storm must return the first id, marked duplicate);
//   - no job exists twice (each key is also the job's name: one job per name).
//
// Twice: the state in SQLite, then on a real etcd (store/etcd). One trial of
// each runs in CI; run N in a row offline with
//   build/tests/coordinator_crash_test --gtest_repeat=20
// Every trial has its own watchdog (SIGALRM): a hang kills the coordinator and
// fails the binary.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "testing/coordinator/coordinator_process.h"
#include "testing/coordinator/retrying_client.h"
#include "testing/coordinator/sim_fleet.h"
#include "testing/coordinator/watchdog.h"
#include "testing/etcd/etcd_cluster.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor {
namespace {

constexpr int kClients = 8;
constexpr int kJobsPerClient = 100;
constexpr int kTotal = kClients * kJobsPerClient;
constexpr int kMaxAttemptsPerKey = 200;
constexpr unsigned kTrialWatchdogSeconds = 60;

rpc::SubmitJobRequest Request(const std::string& key) {
  rpc::SubmitJobRequest req;
  req.set_idempotency_key(key);
  rpc::JobSpec* spec = req.mutable_spec();
  spec->set_name(key);
  spec->set_tenant("crash");
  spec->set_nodes(1);
  spec->set_gpus_per_node(1);
  spec->add_command("true");
  return req;
}

// TLS with the cluster's admin token, as every client of a secure coordinator.
std::unique_ptr<rpc::Coordinator::Stub> NewStub(const bench::CoordinatorProcess& coordinator,
                                                int index) {
  return rpc::Coordinator::NewStub(bench::RestartTolerantChannel(coordinator, index));
}

// What the clients were answered, shared by their threads.
class Answers {
 public:
  // Records that `key` was answered with `id`. False when the key had already
  // been answered with another id.
  bool Record(const std::string& key, const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = ids_.emplace(key, id);
    if (!inserted && it->second != id) {
      conflicts_.push_back(absl::StrCat(key, ": ", it->second, " then ", id));
      return false;
    }
    if (inserted) ++acknowledged_;
    return true;
  }
  void AddRetry() {
    absl::MutexLock lock(&mu_);
    ++retries_;
  }
  void AddFailure(std::string what) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(std::move(what));
  }
  // Blocks until `n` keys were acknowledged, a submission failed for good, or
  // `timeout` passes. True in the first case.
  bool AwaitAcknowledged(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return acknowledged_ >= n || !failures_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
    return acknowledged_ >= n;
  }
  int acknowledged() {
    absl::MutexLock lock(&mu_);
    return acknowledged_;
  }
  int retries() {
    absl::MutexLock lock(&mu_);
    return retries_;
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
  int retries_ ABSL_GUARDED_BY(mu_) = 0;
};

// Submits `key` until answered, retrying on connection errors.
void SubmitUntilAnswered(rpc::Coordinator::Stub& stub, const std::string& key, Answers* answers) {
  rpc::SubmitJobRequest req = Request(key);
  rpc::SubmitJobResponse resp;
  int retries = 0;
  grpc::Status s = bench::CallUntilAnswered(
      [&](grpc::ClientContext* ctx) { return stub.SubmitJob(ctx, req, &resp); }, &retries,
      {.max_attempts = kMaxAttemptsPerKey});
  for (int i = 0; i < retries; ++i) answers->AddRetry();
  if (s.ok()) {
    answers->Record(key, resp.job_id());
  } else if (!bench::RetryableAfterCrash(s.error_code())) {
    answers->AddFailure(absl::StrCat(key, ": code ", s.error_code(), ": ", s.error_message()));
  } else {
    answers->AddFailure(absl::StrCat(key, ": not answered after ", kMaxAttemptsPerKey, " attempts"));
  }
}

std::string Key(int trial, int client, int seq) {
  return absl::StrCat("crash-", trial, "-", client, "-", seq);
}

// The first `n` entries of `v`, one per line.
std::string Head(const std::vector<std::string>& v, size_t n = 10) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < n; ++i) absl::StrAppend(&out, "  ", v[i], "\n");
  if (v.size() > n) absl::StrAppend(&out, "  ... and ", v.size() - n, " more\n");
  return out;
}

// One trial: the state in SQLite, or on a real one-member etcd (Debian's
// etcd-server; the restarted coordinator waits for the killed one's lease,
// 1 s, to run out before it leads).
void KillDuringStorm(bool on_etcd) {
  static int trial = 0;
  ++trial;
  bench::ArmWatchdog(kTrialWatchdogSeconds,
                     "\ncrash-under-load watchdog: trial hung; killing the coordinator\n");

  std::string dir;  // secure, as in production
  absl::StatusOr<bench::CoordinatorProcessOptions> co =
      bench::ScratchCoordinatorOptions("athanor_crash_test", &dir);
  ASSERT_TRUE(co.ok()) << co.status();
  std::unique_ptr<testing_etcd::EtcdCluster> etcd;
  if (on_etcd) {
    absl::StatusOr<std::unique_ptr<testing_etcd::EtcdCluster>> started =
        testing_etcd::EtcdCluster::Start(1, dir + "/etcd");
    ASSERT_TRUE(started.ok()) << started.status();
    etcd = std::move(*started);
    co->state_path = etcd->uri("athanor-crash");
    co->extra_flags = {"--local-dir", dir + "/local", "--etcd-lease-ttl-s", "1", "--etcd-max-txn-ops", "4096"};
  }
  bench::CoordinatorProcess coordinator(*co);
  ASSERT_TRUE(coordinator.Start().ok()) << coordinator.LogTail();
  bench::WatchCoordinator(coordinator.pid());
  // A few simulated agents, so that the jobs fit and run (they follow the
  // coordinator across its restart like real agents).
  bench::SimFleetOptions fo;
  fo.address = coordinator.address();
  fo.agents = 4;
  fo.run_time = std::chrono::milliseconds(100);
  fo.name_prefix = "crash-node";
  fo.tls_dir = co->tls_dir;
  bench::SimFleet fleet(fo);
  fleet.Start();
  ASSERT_TRUE(fleet.WaitRegistered(std::chrono::seconds(20))) << coordinator.LogTail();

  Answers answers;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::unique_ptr<rpc::Coordinator::Stub> stub = NewStub(coordinator, c);
      for (int i = 0; i < kJobsPerClient; ++i) SubmitUntilAnswered(*stub, Key(trial, c, i), &answers);
    });
  }
  // Kill once a third of the storm is acknowledged, restart on the same state and port.
  bool reached = answers.AwaitAcknowledged(kTotal / 3, absl::Seconds(30));
  coordinator.Kill();
  int acknowledged_at_kill = answers.acknowledged();
  absl::Status restarted = coordinator.Start();
  bench::WatchCoordinator(coordinator.pid());
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(reached) << "the storm did not reach " << kTotal / 3 << " acknowledged jobs:\n"
                       << coordinator.LogTail();
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_LT(acknowledged_at_kill, kTotal) << "the kill came after the storm ended";
  EXPECT_GT(answers.retries(), 0) << "no request was cut off by the kill";
  EXPECT_TRUE(answers.failures().empty()) << "unanswered or rejected submissions:\n"
                                          << Head(answers.failures());

  // A deliberate retry of every key: the first job again, never a second.
  std::unique_ptr<rpc::Coordinator::Stub> stub = NewStub(coordinator, kClients);
  std::vector<std::string> not_duplicate;
  for (const auto& [key, id] : answers.ids()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::SubmitJobResponse resp;
    grpc::Status s = stub->SubmitJob(&ctx, Request(key), &resp);
    ASSERT_TRUE(s.ok()) << key << ": " << s.error_message();
    answers.Record(key, resp.job_id());
    if (!resp.duplicate()) not_duplicate.push_back(key);
  }
  EXPECT_TRUE(answers.conflicts().empty()) << "keys answered with two job ids:\n"
                                           << Head(answers.conflicts());
  EXPECT_TRUE(not_duplicate.empty()) << "retries not marked duplicate:\n" << Head(not_duplicate);

  // The coordinator's view: one job per key, under the acknowledged id.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  rpc::ListJobsRequest list;
  list.set_all(true);
  rpc::ListJobsResponse jobs;
  grpc::Status s = stub->ListJobs(&ctx, list, &jobs);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::map<std::string, std::vector<std::string>> ids_by_name;
  for (const rpc::Job& j : jobs.jobs()) ids_by_name[j.spec().name()].push_back(j.id());
  std::map<std::string, std::string> acknowledged = answers.ids();
  EXPECT_EQ(acknowledged.size(), static_cast<size_t>(kTotal));
  std::vector<std::string> wrong;
  for (const auto& [key, id] : acknowledged) {
    const std::vector<std::string>& listed = ids_by_name[key];
    if (listed.size() != 1 || listed[0] != id) {
      std::string all;
      for (const std::string& l : listed) absl::StrAppend(&all, l, " ");
      wrong.push_back(absl::StrCat(key, ": acknowledged as ", id, ", listed ", listed.size(),
                                   " time(s): ", all));
    }
  }
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " of " << kTotal
                             << " keys do not map to exactly one job:\n" << Head(wrong);
  EXPECT_EQ(jobs.jobs_size(), kTotal) << "jobs listed besides one per key";

  bench::DisarmWatchdog();
  fleet.Stop();
  coordinator.Stop();
  bench::WatchCoordinator(0);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

TEST(CoordinatorCrashTest, KillDuringSubmissionStormLosesAndDuplicatesNothing) { KillDuringStorm(false); }

TEST(CoordinatorCrashTest, OnEtcdKillDuringSubmissionStormLosesAndDuplicatesNothing) { KillDuringStorm(true); }

}  // namespace
}  // namespace athanor
