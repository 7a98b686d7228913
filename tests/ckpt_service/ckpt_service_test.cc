// End to end through the node checkpoint service: a 2-node athanor-train job
// under agents that run athanor-checkpoint-service, checkpointing to s3:// on
// s3rver, the coordinator committing each step once every shard is durable.
//
//  - Preempted with a grace shorter than its upload (the services are
//    throttled): the ranks hand off and exit 0 before the grace ends, the
//    upload finishes after they are gone, the step commits, and the job
//    resumes from exactly that step. Its GPUs come free while the step is
//    still uploading: the scheduler holds the job (`athanor why` says so)
//    until the commit, rather than restarting it from nothing.
//  - The coordinator is killed -9 between the last durable shard and COMMIT:
//    the restarted coordinator commits the step once; the job resumes from it.
//  - A service is killed -9 mid-upload: that step never commits; the job
//    resumes from the previous step.
// Every run ends with weights cmp-identical to an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "security/private_file.h"
#include "testing/s3/s3rver_fixture.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// The value of `key` in the first JSON line of `log` carrying `event`; -1 if none.
int64_t EventValue(const std::string& log, const std::string& event, const std::string& key) {
  std::regex re("\\{\"event\":\"" + event + "\".*\"" + key + "\":(\\d+)");
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    std::smatch m;
    std::string l(line);
    if (std::regex_search(l, m, re)) return std::stoll(m[1]);
  }
  return -1;
}

int64_t Count(const std::string& haystack, const std::string& needle) {
  int64_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

class CkptServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s3 = testing_s3::S3rverProcess::Start("ckpt");
    ASSERT_TRUE(s3.ok()) << s3.status();  // CI has s3rver: its absence is a failure
    s3_ = std::move(*s3);
    // Rendezvous ports away from the default 29500+ (which concurrent test
    // runs on this machine also use) and below the ephemeral range (where
    // outgoing connections take ports): a random 200-port window in
    // 10000-27999.
    std::random_device random;
    const int base = 10000 + static_cast<int>(random() % 18000);
    cluster_ = std::make_unique<LocalCluster>(std::vector<std::string>{
        "--min-run-time-s", "0", "--checkpoint-poll-s", "0.2", "--master-port-range",
        absl::StrCat(base, "-", base + 199), "--allow-store-endpoint", s3_->endpoint()});
    cluster_->StartCoordinator();
    // The store's keys are the tenant's (the admin token's tenant "admin"),
    // set by an admin from a 0600 file: never in a URI.
    const std::string credentials = cluster_->dir() + "/store.credentials";
    ASSERT_TRUE(security::WritePrivateFile(credentials, "access_key=S3RVER\nsecret_key=S3RVER\n").ok());
    CliResult set = cluster_->Cli({"admin", "credentials", "set", "admin", "--file", credentials});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    for (const char* node : {"node-a", "node-b"}) {
      cluster_->StartAgent(node, 1, "127.0.0.1",
                           {"--checkpoint-service-dir", cluster_->dir() + "/svc-" + node,
                            "--checkpoint-staging-dir", cluster_->dir() + "/staging-" + node,
                            "--checkpoint-upload-mbps", upload_mbps_});
    }
    ASSERT_TRUE(cluster_->WaitForNodesUp(2));
  }

  std::vector<std::string> Train(const std::string& weights, int every) {
    return {std::string(getenv("ATHANOR_BIN_DIR")) + "/athanor-train", "--seed", "5", "--hidden",
            "256", "--optimizer", "sgd", "--lr", "0.05", "--timeout-s", "20", "--steps", steps_, "--checkpoint-every",
            std::to_string(every), "--keep", "100", "--dump-weights", weights};
  }
  std::string Submit(std::vector<std::string> args, const std::vector<std::string>& cmd) {
    args.insert(args.begin(), "submit");
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    CliResult r = cluster_->Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  // An uninterrupted run of the same job: the weights every test compares to.
  std::string Reference() {
    const std::string weights = cluster_->dir() + "/reference.safetensors";
    std::string id = Submit({"--nodes", "2", "--gpus-per-node", "1", "--checkpoint-uri",
                             s3_->TenantUri("ref")},
                            Train(weights, 0));
    CliResult wait = cluster_->Cli({"wait", id, "--timeout", "120"});
    EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n")
        << AllRankLogs(id, 1) << cluster_->CoordinatorLog();
    // The ranks exit once the last step is handed off; it commits after them.
    EXPECT_TRUE(LocalCluster::WaitFor(
        [&] { return cluster_->GetJob(id).committed_step() == std::stoll(steps_); },
        std::chrono::seconds(60)))
        << AllRankLogs(id, 1) << cluster_->CoordinatorLog();
    return weights;
  }
  std::string RankLog(const std::string& job, int attempt) {
    std::string log;
    for (const char* node : {"node-a", "node-b"}) {
      log += ReadFile(absl::StrCat(cluster_->dir(), "/", node, "/jobs/", job, "/attempt-",
                                   attempt, "/rank-0.log"));
    }
    return log;
  }
  std::string AllRankLogs(const std::string& job, int attempt) {
    std::string out;
    for (const char* node : {"node-a", "node-b"}) {
      for (int r = 0; r < 2; ++r) {
        out += ReadFile(absl::StrCat(cluster_->dir(), "/", node, "/jobs/", job, "/attempt-",
                                     attempt, "/rank-", r, ".log"));
      }
      out += ReadFile(absl::StrCat(cluster_->dir(), "/", node, "/checkpoint-service.log"));
    }
    return out;
  }
  bool RankReached(const std::string& job, int64_t step) {
    return RankLog(job, 1).find(absl::StrCat("{\"step\":", step, ",")) != std::string::npos;
  }
  // A 1-node high-priority job that holds its GPU until `release` exists, so
  // the 2-node victim cannot restart before the test lets it.
  std::string Blocker(const std::string& release) {
    return Submit({"--nodes", "1", "--gpus-per-node", "1", "--priority", "10"},
                  {"sh", "-c", "while [ ! -e " + release + " ]; do sleep 0.05; done"});
  }
  void ExpectSameWeights(const std::string& reference, const std::string& resumed) {
    EXPECT_FALSE(ReadFile(reference).empty());
    SubprocessOptions cmp;
    cmp.argv = {"cmp", reference, resumed};
    auto p = Subprocess::Start(cmp);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ((*p)->Wait().exit_code, 0) << "weights differ from the uninterrupted run";
  }
  std::string AgentLogs() {
    return ReadFile(cluster_->dir() + "/agent-node-a.log") +
           ReadFile(cluster_->dir() + "/agent-node-b.log");
  }

  std::string upload_mbps_ = "0";
  std::string steps_ = "3000";
  std::unique_ptr<testing_s3::S3rverProcess> s3_;
  std::unique_ptr<LocalCluster> cluster_;
};

class ThrottledServiceTest : public CkptServiceTest {
 protected:
  void SetUp() override {
    upload_mbps_ = "0.2";  // an 0.82 MB shard takes ~4 s; the grace is 1 s
    CkptServiceTest::SetUp();
  }
};

class SlowServiceTest : public CkptServiceTest {
 protected:
  void SetUp() override {
    upload_mbps_ = "0.1";  // an 0.82 MB shard takes ~8 s; the grace is 1 s
    CkptServiceTest::SetUp();
  }
};

TEST_F(SlowServiceTest, PreemptionShorterThanTheUploadStillCommitsAndResumesThere) {
  const std::string reference = Reference();
  const std::string resumed = cluster_->dir() + "/resumed.safetensors";
  std::string victim = Submit({"--nodes", "2", "--gpus-per-node", "1", "--preemptible", "--grace",
                               "1s", "--checkpoint-uri", s3_->TenantUri("victim")},
                              Train(resumed, 0));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return RankReached(victim, 50); }, std::chrono::seconds(60)))
      << RankLog(victim, 1);
  const std::string release = cluster_->dir() + "/release";
  std::string blocker = Blocker(release);
  // Both ranks exit 0 (handed off within the 1 s grace, no SIGKILL) ...
  ASSERT_TRUE(LocalCluster::WaitFor([&] {
    std::string agents = AgentLogs();
    return agents.find("job " + victim + " attempt 1 rank 0 exit code 0") != std::string::npos &&
           agents.find("job " + victim + " attempt 1 rank 1 exit code 0") != std::string::npos;
  }, std::chrono::seconds(30))) << AgentLogs();
  const std::string log1 = RankLog(victim, 1);
  const int64_t handed = EventValue(log1, "preempted", "handed_off_step");
  ASSERT_GE(handed, 50) << log1;
  // ... while their shards were still uploading: the step is not committed yet.
  EXPECT_LT(cluster_->GetJob(victim).committed_step(), handed);
  // The blocker ends, so the GPUs are free while the step still uploads: the
  // scheduler holds the victim for it rather than restarting it from nothing
  // (it checkpoints only when preempted).
  std::ofstream(release) << "go";
  EXPECT_EQ(cluster_->Cli({"wait", blocker, "--timeout", "30"}).out, "job " + blocker + " SUCCEEDED\n");
  const std::string held = absl::StrCat("waiting for checkpoint step ", handed, " to finish uploading");
  CliResult why = cluster_->Cli({"why", victim});
  ASSERT_LT(cluster_->GetJob(victim).committed_step(), handed) << "the upload outran the test";
  EXPECT_NE(why.out.find(held), std::string::npos) << why.out << why.err;
  EXPECT_EQ(cluster_->GetJob(victim).state(), rpc::JOB_PENDING);
  // The services finish after the ranks are gone, and the coordinator commits.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->GetJob(victim).committed_step() == handed; }, std::chrono::seconds(60)))
      << cluster_->CoordinatorLog();
  CliResult shown = cluster_->Cli({"job", victim});
  EXPECT_NE(shown.out.find(absl::StrCat("step ", handed, " committed")), std::string::npos) << shown.out;
  CliResult wait = cluster_->Cli({"wait", victim, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + victim + " SUCCEEDED\n")
      << AllRankLogs(victim, 2) << cluster_->CoordinatorLog();
  rpc::Job job = cluster_->GetJob(victim);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(EventValue(RankLog(victim, 2), "resume", "step"), handed) << RankLog(victim, 2);
  ExpectSameWeights(reference, resumed);
}

TEST_F(CkptServiceTest, CoordinatorKilledBeforeCommitCommitsOnceAfterRestart) {
  const std::string reference = Reference();
  const std::string resumed = cluster_->dir() + "/resumed.safetensors";
  // The coordinator started from now on dies before its first COMMIT.
  cluster_->KillCoordinator();
  setenv("ATHANOR_TEST_CRASH_BEFORE_COMMIT", "1", 1);
  cluster_->StartCoordinator();
  unsetenv("ATHANOR_TEST_CRASH_BEFORE_COMMIT");
  std::string victim = Submit({"--nodes", "2", "--gpus-per-node", "1", "--preemptible", "--grace",
                               "10s", "--checkpoint-uri", s3_->TenantUri("victim")},
                              Train(resumed, 0));
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return RankReached(victim, 50); }, std::chrono::seconds(60)))
      << RankLog(victim, 1);
  const std::string release = cluster_->dir() + "/release";
  std::string blocker = Blocker(release);
  const std::string crash_line = "test crash before the COMMIT of step ";
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->CoordinatorLog().find(crash_line) != std::string::npos; },
      std::chrono::seconds(60)))
      << cluster_->CoordinatorLog();
  const int64_t handed = EventValue(RankLog(victim, 1), "preempted", "handed_off_step");
  ASSERT_GE(handed, 50) << RankLog(victim, 1);
  EXPECT_NE(cluster_->CoordinatorLog().find(absl::StrCat(crash_line, handed, " of ", victim)),
            std::string::npos);
  cluster_->KillCoordinator();  // reaps it
  cluster_->StartCoordinator();
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->GetJob(victim).committed_step() == handed; }, std::chrono::seconds(60)))
      << cluster_->CoordinatorLog();
  const std::string committed_line =
      absl::StrCat("job ", victim, ": every shard of step ", handed, " is durable; committed it");
  EXPECT_EQ(Count(cluster_->CoordinatorLog(), committed_line), 1) << cluster_->CoordinatorLog();
  std::ofstream(release) << "go";
  CliResult wait = cluster_->Cli({"wait", victim, "--timeout", "120"});
  ASSERT_EQ(wait.out, "job " + victim + " SUCCEEDED\n")
      << AllRankLogs(victim, 2) << cluster_->CoordinatorLog();
  EXPECT_EQ(EventValue(RankLog(victim, 2), "resume", "step"), handed) << RankLog(victim, 2);
  ExpectSameWeights(reference, resumed);
}

TEST_F(ThrottledServiceTest, ServiceKilledMidUploadNeverCommitsThatStep) {
  steps_ = "500";  // every checkpoint waits for the throttled one before it
  const std::string reference = Reference();
  const std::string resumed = cluster_->dir() + "/resumed.safetensors";
  std::string victim = Submit({"--nodes", "2", "--gpus-per-node", "1", "--max-restarts", "1",
                               "--checkpoint-uri", s3_->TenantUri("victim")},
                              Train(resumed, 100));
  // Step 100 commits; step 200's upload on node-a is then killed with its service.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster_->GetJob(victim).committed_step() == 100; }, std::chrono::seconds(60)))
      << cluster_->CoordinatorLog();
  const std::string svc_log = cluster_->dir() + "/node-a/checkpoint-service.log";
  const std::string uploading = absl::StrCat("uploading ", victim, "/step-0000000200/");
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return ReadFile(svc_log).find(uploading) != std::string::npos; },
      std::chrono::seconds(60)))
      << ReadFile(svc_log);
  std::smatch m;
  std::string agent_a = ReadFile(cluster_->dir() + "/agent-node-a.log");
  ASSERT_TRUE(std::regex_search(agent_a, m, std::regex("checkpoint service started \\(pid (\\d+)")))
      << agent_a;
  ASSERT_EQ(kill(std::stoi(m[1]), SIGKILL), 0);
  // The agent restarts it, and the new one says what it discarded.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return ReadFile(svc_log).find(absl::StrCat("job ", victim, " step 200 rank")) !=
               std::string::npos;
      },
      std::chrono::seconds(30)))
      << ReadFile(svc_log);
  CliResult wait = cluster_->Cli({"wait", victim, "--timeout", "180"});
  ASSERT_EQ(wait.out, "job " + victim + " SUCCEEDED\n")
      << AllRankLogs(victim, 2) << cluster_->CoordinatorLog();
  rpc::Job job = cluster_->GetJob(victim);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(EventValue(RankLog(victim, 2), "resume", "step"), 100) << RankLog(victim, 2);
  ExpectSameWeights(reference, resumed);
}

}  // namespace
}  // namespace athanor::testing
