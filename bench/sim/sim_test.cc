// athanor-sim on workloads small enough to work out by hand: exact JCTs
// under FIFO and LAS, lost work, determinism for a seed, and parse errors
// that name the line and field.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "bench/sim/report.h"
#include "bench/sim/simulator.h"
#include "bench/sim/workload.h"

namespace athanor::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

SimJob Job(const std::string& id, int64_t submit, int nodes, int64_t duration, int priority = 0) {
  SimJob job;
  job.id = id;
  job.submit_s = submit;
  job.nodes = nodes;
  job.gpus_per_node = 1;
  job.duration_s = duration;
  job.priority = priority;
  return job;
}

std::vector<int64_t> Jcts(const SimResult& r) {
  std::vector<int64_t> out;
  for (const JobOutcome& job : r.jobs) out.push_back(job.jct_s());
  return out;
}

// A fresh folder name under the test's temporary directory.
std::filesystem::path TempPath(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  return path;
}

// A run of `policy` from 0 to `end_s` on `gpus` GPUs with the given steps
// and one job, finished at `finish_s` (-1: never).
SimResult PlotRun(const std::string& policy, int64_t end_s, int64_t gpus, std::vector<Step> steps,
                  int64_t finish_s) {
  SimResult r;
  r.policy = policy;
  r.end_s = end_s;
  r.total_gpus = gpus;
  r.steps = std::move(steps);
  JobOutcome job;
  job.finish_s = finish_s;
  r.jobs = {job};
  return r;
}

// Options that make the arithmetic exact: no exit delay, no minimum run time,
// checkpoints every 100 s, no declared limits.
SimOptions Exact() {
  SimOptions o;
  o.checkpoint_interval_s = 100;
  o.preempt_exit_s = 0;
  o.limit_factor = 0;
  o.tick_s = 60;
  return o;
}

// `recall_s`: LasOptions::recall_after (0: off).
PolicyRun Policy(const std::string& name, int recall_s = 60) {
  sched::SchedulerOptions base;
  base.min_run_time = Duration::zero();
  base.las.thresholds_gpu_s = {100};
  base.las.recall_after = std::chrono::seconds(recall_s);
  for (PolicyRun run : ComparedPolicies(base)) {
    if (run.name == name) return run;
  }
  ADD_FAILURE() << "no policy " << name;
  return {};
}

// Two 1-GPU nodes. A (both nodes, 1000 s) at 0, B and C (one node, 100 s)
// at 10 and 20.
Workload TwoNodesThreeJobs() {
  Workload w;
  w.nodes = UniformNodes(2, 1);
  w.jobs = {Job("A", 0, 2, 1000), Job("B", 10, 1, 100), Job("C", 20, 1, 100)};
  return w;
}

TEST(SimTest, FifoRunsTheGangFirst) {
  // A runs 0-1000; B and C then run 1000-1100.
  auto r = Simulate(TwoNodesThreeJobs(), Policy("fifo"), Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(1000, 1090, 1080));
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(r->end_s, 1100);
}

TEST(SimTest, LasPreemptsTheGangAtItsCheckpoint) {
  // A has 200 GPU-s (queue 1, threshold 100) by its checkpoint at 100 and is
  // preempted then for B, losing nothing. A returns right behind B, ahead of
  // C: B runs 100-200, A resumes at 200 with 900 s left and ends at 1100
  // (C, declaring no time limit, cannot backfill), then C runs 1100-1200.
  // Recalls off (below with them).
  auto r = Simulate(TwoNodesThreeJobs(), Policy("las", 0), Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(1100, 190, 1180));
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_EQ(r->jobs[0].lost_gpu_s, 0);
  EXPECT_EQ(r->jobs[0].held_s, 1000);
  EXPECT_EQ(r->busy_gpu_s, 2000 + 200);

  PolicySummary las = Summarise(*r, *Simulate(TwoNodesThreeJobs(), Policy("fifo"), Exact()));
  EXPECT_DOUBLE_EQ(las.jct_mean_s, (1100.0 + 190 + 1180) / 3);
  EXPECT_DOUBLE_EQ(las.jct_vs_baseline, 2470.0 / 3170);
  EXPECT_DOUBLE_EQ(las.run_mean_s, 1200.0 / 3);
  EXPECT_DOUBLE_EQ(las.jct_floor_vs_baseline, 1200.0 / 3170);
  // A queued 100 s where FIFO queued it 0, floored at 60 s: 1.67x, not starved.
  EXPECT_EQ(las.starved, 0);
  EXPECT_DOUBLE_EQ(las.worst_queue_ratio, 100.0 / 60);
}

TEST(SimTest, LasGangRecallsItsGpusFromTheJobThatTookThem) {
  // As above, but A, pending 60 s by 160, recalls its GPUs at the first
  // pass after that, the tick at 190: B, which took them at 100, is
  // preempted then and loses its 90 s (no checkpoint yet). A runs 190-1090;
  // B may not take the GPUs back in turn (A, older, was preempted for order
  // once already), so B and C run 1090-1190.
  auto r = Simulate(TwoNodesThreeJobs(), Policy("las"), Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(1090, 1180, 1170));
  EXPECT_EQ(r->preemptions, 2);
  EXPECT_EQ(r->jobs[0].lost_gpu_s, 0);
  EXPECT_EQ(r->jobs[0].held_s, 1000);
  EXPECT_EQ(r->jobs[1].lost_gpu_s, 90);
  EXPECT_EQ(r->busy_gpu_s, 2000 + 90 + 100 + 100);
  PolicySummary las = Summarise(*r, *Simulate(TwoNodesThreeJobs(), Policy("fifo"), Exact()));
  // A queued 90 s where FIFO queued it 0, floored at 60 s.
  EXPECT_EQ(las.starved, 0);
  EXPECT_DOUBLE_EQ(las.worst_queue_ratio, 90.0 / 60);
}

// Starvation against the baseline: 3x its queueing delay, floored at 60 s
// and, with a run fraction, at that share of the job's run time.
TEST(SimTest, StarvationFloorsAndTheListOfStarvedJobs) {
  auto outcome = [](int64_t queued, int preemptions) {
    JobOutcome job;
    job.gpus = 8;
    job.run_s = 1000;
    job.held_s = 1000;
    job.first_start_s = 0;
    job.finish_s = 1000 + queued;
    job.preemptions = preemptions;
    return job;
  };
  SimResult fifo, las;
  fifo.policy = "fifo";
  fifo.jobs = {outcome(0, 0), outcome(0, 0)};
  las.policy = "las";
  las.jobs = {outcome(200, 1), outcome(180, 1)};  // 200 s > 3 x 60 s; 180 s is not
  PolicySummary strict = Summarise(las, fifo);
  EXPECT_EQ(strict.starved, 1);
  EXPECT_EQ(strict.starved_preempted, 1);
  EXPECT_DOUBLE_EQ(strict.worst_queue_ratio, 200.0 / 60);
  PolicySummary relative = Summarise(las, fifo, StarvationRule{0.1});  // floor 100 s
  EXPECT_EQ(relative.starved, 0);
  EXPECT_DOUBLE_EQ(relative.worst_queue_ratio, 2.0);

  std::ostringstream out;
  PrintStarved(out, las, fifo);
  EXPECT_EQ(out.str(),
            "las: 1 starved\n"
            "     job  gpus prio  submit_h    run_h  first_h queued_h fifo_q_h  ratio preem fail  cstop  cheld_h\n"
            "       0     8    0      0.00     0.28     0.00     0.06     0.00    3.3     1    0      0     0.00\n");
  out.str("");
  PrintStarved(out, las, fifo, StarvationRule{0.1});
  EXPECT_EQ(out.str(), "las: 0 starved\n");
  EXPECT_EQ(StarvedToJson(las, fifo).dump(),
            R"([{"credit_held_s":0,"credit_stops":0,"failures":0,"fifo_queued_s":0,"first_wait_s":0,"gpus":8,"job":0,"preemptions":1,"priority":0,)"
            R"("queued_s":200,"ratio":3.3333333333333335,"run_s":1000,"submit_s":0}])");
  EXPECT_EQ(StarvedToJson(las, fifo, StarvationRule{0.1}).dump(), "[]");
}

TEST(SimTest, LasPreemptsAJobForOrderOnlyOnce) {
  // As above, plus D (both nodes, 1000 s) at 30 and E (one node, 100 s) at
  // 300. A, preempted once at 100, is in queue 1 again at its checkpoint at
  // 300, but E may not preempt it a second time: A ends at 1100 as above.
  // D, behind C, runs from 1200 and is preempted (its first time) for E at
  // its checkpoint at 1300.
  Workload w = TwoNodesThreeJobs();
  w.jobs.push_back(Job("D", 30, 2, 1000));
  w.jobs.push_back(Job("E", 300, 1, 100));
  auto r = Simulate(w, Policy("las", 0), Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->jobs[0].preemptions, 1);
  EXPECT_EQ(r->jobs[0].jct_s(), 1100);
  EXPECT_EQ(r->jobs[3].preemptions, 1);
  EXPECT_EQ(r->jobs[4].first_start_s, 1300);
  EXPECT_EQ(r->preemptions, 2);
}

// --plots DIR makes the folder, writes each policy's data and draws the PNGs
// with gnuplot (installed by scripts/install-test-tools).
TEST(SimTest, PlotsGoIntoAFolderItMakes) {
  const std::filesystem::path top = TempPath("sim-plots");
  const std::filesystem::path dir = top / "nested";
  // One of two GPUs busy throughout, three jobs pending until 1800.
  absl::Status written = WritePlots(dir.string(), {PlotRun("fifo", 36000, 2, {{0, 1, 3}, {1800, 1, 0}}, 1800)});
  ASSERT_TRUE(written.ok()) << written;
  auto read = [&](const char* name) {
    std::ifstream in(dir / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string timeline = read("timeline-fifo.dat");
  // Up to a quarter past the last pending instant, 2250 s: 300 bins of
  // 7.5 s, each at its middle; the queue empties between bins 239 and 240.
  EXPECT_EQ(std::count(timeline.begin(), timeline.end(), '\n'), 301);
  EXPECT_EQ(timeline.substr(0, timeline.find('\n', timeline.find('\n') + 1) + 1),
            "# hours utilisation pending_jobs\n0.001 0.5000 3.0\n");
  EXPECT_THAT(timeline, HasSubstr("\n0.499 0.5000 3.0\n0.501 0.5000 0.0\n"));
  EXPECT_THAT(timeline, ::testing::EndsWith("\n0.624 0.5000 0.0\n"));
  EXPECT_EQ(read("jct-fifo.dat"), "# jct_hours fraction_of_jobs\n0.50000 1.00000\n0.50000 1\n");
  for (const char* png : {"utilisation.png", "queue.png", "jct.png"}) {
    EXPECT_EQ(read(png).substr(0, 8), "\x89PNG\r\n\x1a\n") << png;
  }
  std::filesystem::remove_all(top);
}

// A policy under which no job finished has no JCT curve; with none at all
// there is no jct.png (gnuplot refuses an empty plot).
TEST(SimTest, PlotsWithoutFinishedJobsLeaveOutTheJctCurve) {
  const std::filesystem::path dir = TempPath("sim-nojct");
  absl::Status written = WritePlots(dir.string(), {PlotRun("fifo", 600, 1, {{0, 1, 1}}, -1)});
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_TRUE(std::filesystem::exists(dir / "queue.png"));
  EXPECT_FALSE(std::filesystem::exists(dir / "jct.png"));
  std::ifstream in(dir / "plots.gp");
  const std::string gp(std::istreambuf_iterator<char>(in), {});
  EXPECT_THAT(gp, Not(HasSubstr("jct-fifo.dat")));
  std::filesystem::remove_all(dir);
}

// Every bin of a timeline gets its share of each step, even where a bin's
// edge rounds (304 s in 300 bins: t / width put 253 x width in bin 252,
// and the rest of the step was dropped).
TEST(SimTest, PlotTimelineBinsCoverEveryStep) {
  const std::filesystem::path dir = TempPath("sim-bins");
  absl::Status written = WritePlots(dir.string(), {PlotRun("las", 304, 1, {{0, 1, 1}}, 304)});
  ASSERT_TRUE(written.ok()) << written;
  std::ifstream in(dir / "timeline-las.dat");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  int bins = 0;
  while (std::getline(in, line)) {
    ++bins;
    EXPECT_THAT(line, ::testing::EndsWith(" 1.0000 1.0")) << "bin " << bins - 1;
  }
  EXPECT_EQ(bins, 300);
  std::filesystem::remove_all(dir);
}

// Two 1-GPU nodes. B (one node, 100 s) and the elastic E (1 to 2 nodes,
// 1000 s on both) at 0.
Workload TwoNodesAndAnElasticJob() {
  Workload w;
  w.nodes = UniformNodes(2, 1);
  w.jobs = {Job("B", 0, 1, 100), Job("E", 0, 2, 1000)};
  w.jobs[1].min_nodes = 1;
  return w;
}

// E starts on the one node B leaves, at half speed.
// At its checkpoint at 100, as B ends, it could use both: it is stopped
// there (nothing lost: the checkpoint has just committed) and starts again
// on both, with 950 s of work left at full speed.
TEST(SimTest, AnElasticJobStartsSmallAndGrowsAtItsCheckpoint) {
  Workload w = TwoNodesAndAnElasticJob();
  for (const char* policy : {"fifo", "fifo-backfill", "default", "las"}) {
    SCOPED_TRACE(policy);
    auto r = Simulate(w, Policy(policy), Exact());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(Jcts(*r), ElementsAre(100, 1050));
    EXPECT_EQ(r->grows, 1);
    EXPECT_EQ(r->jobs[1].grows, 1);
    EXPECT_EQ(r->preemptions, 0);
    EXPECT_EQ(r->jobs[1].held_s, 1050);
    EXPECT_EQ(r->jobs[1].lost_gpu_s, 0);
    EXPECT_EQ(r->busy_gpu_s, 100 + 100 + 950 * 2);
  }
  // Fixed at two nodes it waits for B: 100-1100.
  w.jobs[1].min_nodes = 0;
  auto fixed = Simulate(w, Policy("fifo"), Exact());
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_THAT(Jcts(*fixed), ElementsAre(100, 1100));
  EXPECT_EQ(fixed->grows, 0);
}

// With a 30 s stop the grow costs its GPU's 30 s: E exits at 130 and runs
// 130-1080 on both nodes.
TEST(SimTest, AGrowHoldsTheGpusUntilTheRanksHaveExited) {
  Workload w = TwoNodesAndAnElasticJob();
  SimOptions o = Exact();
  o.preempt_exit_s = 30;
  auto r = Simulate(w, Policy("fifo-backfill"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(100, 1080));
  EXPECT_EQ(r->jobs[1].lost_gpu_s, 30);
  EXPECT_EQ(r->busy_gpu_s, 100 + 130 + 950 * 2);
}

TEST(SimTest, LasNeverPreemptsForOrderWithoutACheckpoint) {
  SimOptions o = Exact();
  o.checkpoint_interval_s = 0;
  auto r = Simulate(TwoNodesThreeJobs(), Policy("las"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(1000, 1090, 1080));
  EXPECT_EQ(r->preemptions, 0);
}

TEST(SimTest, PreemptionLosesWorkSinceTheLastCheckpoint) {
  // One GPU. L (priority 0, 1000 s) at 0 checkpoints at 100; H (priority 1,
  // 100 s) at 150 preempts it under the default policy: L keeps 100 s, loses
  // 50, runs again 250-1150.
  Workload w;
  w.nodes = UniformNodes(1, 1);
  w.jobs = {Job("L", 0, 1, 1000, 0), Job("H", 150, 1, 100, 1)};
  auto r = Simulate(w, Policy("default"), Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Jcts(*r), ElementsAre(1150, 100));
  EXPECT_EQ(r->jobs[0].lost_gpu_s, 50);
  EXPECT_EQ(r->jobs[0].preemptions, 1);
  PolicySummary s = Summarise(*r, *r);
  EXPECT_DOUBLE_EQ(s.lost_gpu_h, 50.0 / 3600);
  EXPECT_DOUBLE_EQ(s.utilisation, 1.0);  // the GPU was never idle
}

// Credit, with billing's ledger: tenant a's plan grants 1 GPU-hour (1.00 at
// 1.00 a GPU-hour) at the start of each month, the clock's seconds read as
// Unix time (January 1970 has 31 days, February 28). b has no plan.
TEST(SimTest, OutOfCreditStopsTheTenantUntilNextMonthsGrant) {
  Workload w;
  w.nodes = UniformNodes(1, 2);
  w.jobs = {Job("A", 0, 1, 10000), Job("B", 0, 1, 5000)};
  w.jobs[0].tenant = "a";
  w.jobs[1].tenant = "b";
  SimOptions o = Exact();
  o.preempt_exit_s = 30;
  o.monthly_gpu_h = 1;
  o.credit_tenants = {"a"};
  auto r = Simulate(w, Policy("fifo"), o);
  ASSERT_TRUE(r.ok()) << r.status();
  // January: A runs from 0 and has used its hour at 3600 (a checkpoint then):
  // stopped, it exits at 3630, charged to then: 1.008333, so -0.008333 left.
  // February 1 (2,678,400): nothing of January's grant expires; the new one
  // leaves 0.991667, which runs out 3571 s into the attempt (0.991944
  // charged): stopped at 2,681,971, 71 s after its checkpoint at +3500, out
  // at 2,682,001 (charged 3601 s: 1.000277). March 1 (5,097,600): 0.991390
  // left; the last 2900 s cost 0.805555, and A ends at 5,100,500.
  const JobOutcome& a = r->jobs[0];
  EXPECT_EQ(a.finish_s, 5100500);
  EXPECT_EQ(a.credit_stops, 2);
  EXPECT_EQ(a.preemptions, 0);
  EXPECT_EQ(a.held_s, 3630 + 3601 + 2900);
  EXPECT_EQ(a.credit_held_s, (2678400 - 3630) + (5097600 - 2682001));
  EXPECT_EQ(a.queued_s(), 0);  // held for credit is not queueing
  EXPECT_EQ(a.lost_gpu_s, 30 + 101);
  // B, without a plan, never waits.
  EXPECT_EQ(r->jobs[1].finish_s, 5000);
  EXPECT_EQ(r->jobs[1].credit_stops, 0);
  EXPECT_EQ(r->credit_holds, 2);
  EXPECT_EQ(r->credit_stops, 2);
  PolicySummary s = Summarise(*r, *r);
  EXPECT_EQ(s.credit_holds, 2);
  EXPECT_EQ(s.credit_stops, 2);
  EXPECT_DOUBLE_EQ(s.credit_held_h, static_cast<double>(a.credit_held_s) / 3600);
  std::ostringstream table;
  PrintTable(table, {s});
  EXPECT_THAT(table.str(), HasSubstr("out of credit: tenants held / attempts stopped"));

  // Without plans the same run never stops A.
  o.monthly_gpu_h = 0;
  o.credit_tenants.clear();
  auto free = Simulate(w, Policy("fifo"), o);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ(free->jobs[0].finish_s, 10000);
  EXPECT_EQ(free->credit_holds, 0);
  std::ostringstream plain;
  PrintTable(plain, {Summarise(*free, *free)});
  EXPECT_THAT(plain.str(), Not(HasSubstr("out of credit")));
}

TEST(SimTest, CreditForATenantWithoutJobsIsAnError) {
  SimOptions o = Exact();
  o.monthly_gpu_h = 1;
  o.credit_tenants = {"nobody"};
  auto r = Simulate(TwoNodesThreeJobs(), Policy("fifo"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "credit tenant 'nobody' has no jobs in the workload");
  o.credit_tenants.clear();
  o.monthly_gpu_h = -1;
  EXPECT_EQ(Simulate(TwoNodesThreeJobs(), Policy("fifo"), o).status().message(),
            "simulator: monthly GPU-hours must be in [0, 1e9]");
}

TEST(SimTest, PassTimeOverWhatThePassLookedAt) {
  SimResult r = PlotRun("fifo", 100, 8, {}, 100);
  r.pass_us = {10, 30, 400};
  r.pass_work = {1000, 3000, 2000};  // 10, 10 and 200 µs per 1,000
  PolicySummary s = Summarise(r, r);
  EXPECT_DOUBLE_EQ(s.pass_mean_us_per_k, (10.0 + 10 + 200) / 3);
  EXPECT_DOUBLE_EQ(s.pass_p99_us_per_k, 200);
  // A run records one entry per pass.
  auto run = Simulate(TwoNodesThreeJobs(), Policy("fifo"), Exact());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->pass_work.size(), run->pass_us.size());
  EXPECT_EQ(run->pass_work.front(), 2 + 1);  // 2 nodes, A pending at 0
  EXPECT_EQ(run->pass_work[1], 2 + 2);      // at 10: A running, B pending
}

TEST(SimTest, SameSeedSameRun) {
  SyntheticOptions so;
  so.nodes = 16;
  so.jobs = 300;
  so.seed = 7;
  auto w1 = Synthetic(so);
  auto w2 = Synthetic(so);
  ASSERT_TRUE(w1.ok() && w2.ok());
  SimOptions o;
  o.mtbf_s = 86400;  // failures too
  o.seed = 7;
  auto a = Simulate(*w1, Policy("las"), o);
  auto b = Simulate(*w2, Policy("las"), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Jcts(*a), Jcts(*b));
  EXPECT_EQ(a->node_failures, b->node_failures);
  EXPECT_GT(a->node_failures, 0);
  EXPECT_EQ(a->preemptions, b->preemptions);

  so.seed = 8;
  auto w3 = Synthetic(so);
  ASSERT_TRUE(w3.ok());
  auto c = Simulate(*w3, Policy("las"), o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Jcts(*a), Jcts(*c));
}

TEST(SimTest, SyntheticIsHeavyTailed) {
  SyntheticOptions so;
  so.nodes = 10'000;
  so.jobs = 20'000;
  auto w = Synthetic(so);
  ASSERT_TRUE(w.ok());
  int single = 0, large = 0;
  for (const SimJob& job : w->jobs) {
    single += job.total_gpus() == 1;
    large += job.total_gpus() >= 64;
    EXPECT_GE(job.duration_s, 60);
    EXPECT_LE(job.duration_s, 14 * 86400);
  }
  EXPECT_GT(single, 20'000 * 50 / 100);
  EXPECT_LT(large, 20'000 * 5 / 100);
  EXPECT_GT(large, 0);
}

// --elastic-fraction changes only min_nodes, of multi-node gangs only, to
// half their nodes; the jobs are the same for any share.
TEST(SimTest, SyntheticElasticShareTouchesOnlyGangsMinNodes) {
  SyntheticOptions so;
  so.jobs = 4000;
  auto fixed = Synthetic(so);
  so.elastic_fraction = 0.5;
  auto half = Synthetic(so);
  so.elastic_fraction = 1;
  auto all = Synthetic(so);
  ASSERT_TRUE(fixed.ok() && half.ok() && all.ok());
  int gangs = 0, elastic_half = 0;
  for (size_t i = 0; i < fixed->jobs.size(); ++i) {
    const SimJob& f = fixed->jobs[i];
    const SimJob& h = half->jobs[i];
    const SimJob& a = all->jobs[i];
    EXPECT_EQ(f.min_nodes, 0);
    EXPECT_EQ(std::tie(h.id, h.submit_s, h.nodes, h.gpus_per_node, h.duration_s, h.tenant),
              std::tie(f.id, f.submit_s, f.nodes, f.gpus_per_node, f.duration_s, f.tenant));
    EXPECT_EQ(a.min_nodes, f.nodes > 1 ? f.nodes / 2 : 0) << f.id;
    EXPECT_TRUE(h.min_nodes == 0 || h.min_nodes == f.nodes / 2) << f.id;
    gangs += f.nodes > 1;
    elastic_half += h.elastic();
  }
  EXPECT_EQ(fixed->notes, std::vector<std::string>{"4000 jobs on 256 x 8 GPUs, offered load 1.2, seed 1"});
  EXPECT_EQ(all->notes.back(), absl::StrCat("4000 jobs on 256 x 8 GPUs, offered load 1.2, seed 1, ", gangs,
                                            " elastic gangs"));
  EXPECT_GT(elastic_half, gangs * 4 / 10);
  EXPECT_LT(elastic_half, gangs * 6 / 10);
  so.elastic_fraction = 1.5;
  EXPECT_THAT(std::string(Synthetic(so).status().message()), HasSubstr("elastic fraction in [0, 1]"));
}

TEST(SimTest, CsvJobs) {
  auto w = ParseJobsCsv("submit_time,num_gpus,duration,tenant,priority,nodes\n"
                        "5,16,100,a,1,2\n"
                        "0,4,50,b,0,1\n",
                        "jobs.csv", 4, 8);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 2u);
  EXPECT_EQ(w->jobs[0].submit_s, 0);  // sorted by submit time
  EXPECT_EQ(w->jobs[1].nodes, 2);
  EXPECT_EQ(w->jobs[1].gpus_per_node, 8);
  EXPECT_EQ(w->jobs[1].tenant, "a");
  EXPECT_EQ(w->jobs[1].priority, 1);
  EXPECT_FALSE(w->jobs[1].elastic());

  w = ParseJobsCsv("submit_time,num_gpus,duration,tenant,priority,nodes,min_nodes\n"
                   "0,32,100,a,0,4,2\n"
                   "1,16,100,a,0,2,0\n"
                   "2,16,100,a,0,2,2\n",
                   "jobs.csv", 4, 8);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 3u);
  EXPECT_EQ(w->jobs[0].min_nodes, 2);
  EXPECT_TRUE(w->jobs[0].elastic());
  EXPECT_FALSE(w->jobs[1].elastic());
  EXPECT_FALSE(w->jobs[2].elastic());
}

TEST(SimTest, CsvErrorsNameLineAndField) {
  auto bad = [](const std::string& text) {
    auto w = ParseJobsCsv(text, "jobs.csv", 4, 8);
    EXPECT_FALSE(w.ok());
    return std::string(w.status().message());
  };
  EXPECT_THAT(bad("submit_time,num_gpus,duration\n0,1,100\n5,x,100\n"),
              HasSubstr("jobs.csv:3: field 'num_gpus': expected an integer in [1, 32], got 'x'"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration\n0,1\n"), HasSubstr("jobs.csv:2: 2 fields, expected 3"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration\n0,1,0\n"), HasSubstr("jobs.csv:2: field 'duration'"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration\n-1,1,5\n"), HasSubstr("jobs.csv:2: field 'submit_time'"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration\n0,12,5\n"),
              HasSubstr("jobs.csv:2: field 'num_gpus': 12 is more than one node's 8"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration,tenant,priority,nodes\n0,12,5,a,0,5\n"),
              HasSubstr("jobs.csv:2: field 'nodes': expected an integer in [1, 4], got '5'"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration,tenant,priority,nodes\n0,10,5,a,0,4\n"),
              HasSubstr("jobs.csv:2: field 'nodes': 10 GPUs do not split evenly into 4"));
  EXPECT_THAT(bad("time,gpus\n"), HasSubstr("jobs.csv:1: expected a header"));
  EXPECT_THAT(bad("submit_time,num_gpus,duration,tenant,priority,nodes,min_nodes\n0,16,5,a,0,2,3\n"),
              HasSubstr("jobs.csv:2: field 'min_nodes': expected an integer in [0, 2], got '3'"));
  EXPECT_THAT(bad("submit_time,gpus,duration\n"), HasSubstr("header must be"));
  EXPECT_THAT(bad(""), HasSubstr("empty"));
}

TEST(SimTest, OpenbRowsRoundFractionalGpusUp) {
  const std::string nodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n";
  const std::string pods =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "p0,1000,1024,1,460,,LS,Running,10,110,20\n"
      "p1,1000,1024,0,0,,BE,Running,0,5,0\n"
      "p2,1000,1024,1,1000,,BE,Failed,0,5,\n";
  auto w = ParseOpenb(nodes, pods, "traces");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->jobs.size(), 1u);
  EXPECT_EQ(w->jobs[0].gpus_per_node, 1);
  EXPECT_EQ(w->jobs[0].duration_s, 90);
  EXPECT_EQ(w->jobs[0].priority, 1);
  EXPECT_THAT(w->notes[0], HasSubstr("1 fractional-GPU pods rounded up"));

  auto broken = ParseOpenb(nodes, absl::StrCat(pods, "p3,1000,1024,1,2000,,BE,Running,0,5,0\n"), "traces");
  EXPECT_THAT(std::string(broken.status().message()),
              HasSubstr("traces/openb_pod_list_default.csv:5: field 'gpu_milli'"));
  auto short_node = ParseOpenb("sn,cpu_milli,memory_mib,gpu,model\nn0,64000\n", pods, "traces");
  EXPECT_THAT(std::string(short_node.status().message()),
              HasSubstr("traces/openb_node_list_gpu_node.csv:2: 2 fields, expected 5"));
}

}  // namespace
}  // namespace athanor::sim
