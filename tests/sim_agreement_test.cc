// athanor-sim against the real coordinator. The same 20-job workload (4
// nodes x 2 GPUs; gangs of 1, 2 and 2x2 GPUs that `sleep` their run time;
// one arrival every 2 s, offered load about 1.2) runs through a coordinator
// with four agents on loopback and through `athanor-sim --csv` under the
// default policy, each job declaring twice its run time as its limit in both.
// Their mean and worst job completion times must agree within 10%: the
// simulator's figures stand for what the scheduler does, not for a model of
// it. The real run's JCT is from its submission to its attempt's end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

struct SimJob {
  int submit_s;
  int gpus;
  int duration_s;
  int nodes;
};

// Drawn once (seeded) and fixed here so both sides see the same jobs.
const std::vector<SimJob> kJobs = {
    {0, 2, 8, 1},   {2, 2, 16, 1}, {4, 1, 6, 1},   {6, 4, 6, 2},   {8, 1, 12, 1},
    {10, 2, 10, 1}, {12, 4, 8, 2}, {14, 1, 14, 1}, {16, 2, 6, 1},  {18, 1, 10, 1},
    {20, 4, 12, 2}, {22, 2, 8, 1}, {24, 1, 16, 1}, {26, 2, 12, 1}, {28, 4, 6, 2},
    {30, 1, 8, 1},  {32, 2, 14, 1}, {34, 1, 6, 1}, {36, 4, 10, 2}, {38, 2, 8, 1},
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(SimAgreementTest, SimulatorAndCoordinatorAgreeOnJobCompletionTimes) {
  LocalCluster cluster;
  cluster.StartCoordinator();
  for (const char* node : {"n1", "n2", "n3", "n4"}) cluster.StartAgent(node, 2);
  ASSERT_TRUE(cluster.WaitForNodesUp(4)) << cluster.CoordinatorLog();
  LocalCluster::RearmWatchdog();  // the workload runs about 70 s

  // The simulator's side.
  const std::string csv = cluster.dir() + "/jobs.csv";
  {
    std::ofstream out(csv);
    out << "submit_time,num_gpus,duration,tenant,priority,nodes\n";
    for (const SimJob& j : kJobs) out << j.submit_s << "," << j.gpus << "," << j.duration_s << ",t,0," << j.nodes << "\n";
  }
  const char* bin_dir = std::getenv("ATHANOR_BIN_DIR");
  ASSERT_NE(bin_dir, nullptr);
  const std::string cmd = absl::StrCat(bin_dir, "/athanor-sim --csv ", csv,
                                       " --nodes 4 --gpus-per-node 2 --limit-factor 2 --tick-s 1 "
                                       "--checkpoint-interval-s 0 --json");
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string sim_out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) sim_out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << sim_out;
  nlohmann::json sim = nlohmann::json::parse(sim_out);
  double sim_mean = -1, sim_p99 = -1;
  for (const nlohmann::json& p : sim["policies"]) {
    if (p["policy"] == "default") {
      ASSERT_EQ(p["finished"], 20);
      sim_mean = p["jct_mean_s"].get<double>();
      sim_p99 = p["jct_p99_s"].get<double>();
    }
  }
  ASSERT_GT(sim_mean, 0) << sim_out;

  // The coordinator's side: each job submitted at its arrival time.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> ids;
  std::vector<double> submitted;
  for (const SimJob& j : kJobs) {
    // Pacing the arrivals of the workload, not waiting for an event.
    std::this_thread::sleep_until(t0 + std::chrono::seconds(j.submit_s));  // sleep override: arrival times
    submitted.push_back(UnixNow());
    CliResult r = cluster.Cli({"submit", "--nodes", absl::StrCat(j.nodes), "--gpus-per-node",
                               absl::StrCat(j.gpus / j.nodes), "--time-limit", absl::StrCat(2 * j.duration_s, "s"),
                               "--", "sleep", absl::StrCat(j.duration_s)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ids.push_back(r.out.substr(0, r.out.find('\n')));
  }
  std::vector<double> jct;
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster.GetJob(ids[i]).state() == rpc::JOB_SUCCEEDED; },
                                      std::chrono::seconds(60)))
        << "job " << ids[i] << ": " << cluster.GetJob(ids[i]).DebugString();
    rpc::Job job = cluster.GetJob(ids[i]);
    ASSERT_EQ(job.attempt(), 1);
    ASSERT_GE(job.attempts_size(), 1);
    jct.push_back(job.attempts(job.attempts_size() - 1).end_unix() - submitted[i]);
  }
  const double real_mean = Mean(jct), real_max = Max(jct);
  std::cout << "sim-vs-real: mean JCT " << sim_mean << " s (athanor-sim) vs " << real_mean
            << " s (coordinator), ratio " << real_mean / sim_mean << "; p99/max " << sim_p99 << " s vs " << real_max
            << " s, ratio " << real_max / sim_p99 << "\n";
  EXPECT_NEAR(real_mean / sim_mean, 1.0, 0.10);
  EXPECT_NEAR(real_max / sim_p99, 1.0, 0.10);
}

}  // namespace
}  // namespace athanor::testing
