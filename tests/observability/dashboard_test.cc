// The web dashboard in Debian's headless Chromium against a live secure
// cluster, over HTTPS with the coordinator's certificate pinned:
// the page's DOM (after its scripts ran) lists the running job with its
// state, colours its GPUs allocated in the grid, shows the pending job's
// `why`, and charts loss points that are exactly the job's step lines; after
// a preemption the job page's attempts timeline shows attempt 1 preempted and
// attempt 2 running, and its log tail holds lines of `athanor logs`.
// Screenshots of both pages are saved as artifacts (ArtifactDir()).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/observability/obs_test_util.h"

namespace athanor::testing {
namespace {

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

int Count(const std::string& text, const std::regex& re) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(ObservabilityDashboardTest, ShowsJobsGridQueueAndLossChartInChromium) {
  LocalCluster cluster(OwnMasterPort());
  cluster.EnableHttp();
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const std::string running = SubmitLongTraining(cluster, "alice", 2, 1);
  ASSERT_FALSE(running.empty());
  // No GPU is left for this one: it waits, and says why.
  CliResult waiting = cluster.Cli({"submit", "--tenant", "bob", "--name", "queued", "--nodes", "1",
                                   "--gpus-per-node", "1", "--", "/bin/true"});
  ASSERT_EQ(waiting.exit_code, 0) << waiting.err;
  const std::string pending = waiting.out.substr(0, waiting.out.find('\n'));

  // Wait for the view to hold both, and for 20 charted steps.
  std::string why;
  bool ready = LocalCluster::WaitFor(
      [&] {
        nlohmann::json view = GetJson(cluster, "/api/cluster");
        nlohmann::json history = GetJson(cluster, "/api/telemetry?job=" + running);
        if (view.is_null() || history.is_null() || history["samples"].size() < 20) return false;
        bool run = false;
        for (const nlohmann::json& j : view["jobs"]) {
          if (j["id"] == running) run = j["state"] == "RUNNING";
          if (j["id"] == pending && j["state"] == "PENDING" && !j["why"].empty()) {
            std::vector<std::string> reasons = j["why"];
            why = absl::StrJoin(reasons, "; ");
          }
        }
        return run && !why.empty();
      },
      std::chrono::seconds(45));
  ASSERT_TRUE(ready) << "the cluster view never showed a running job with 20 steps and a pending one:\n"
                     << cluster.CoordinatorLog();
  // The why text is the scheduler's, as `athanor why` prints it.
  CliResult why_cli = cluster.Cli({"why", pending, "--json"});
  nlohmann::json why_json = nlohmann::json::parse(why_cli.out, nullptr, false);
  ASSERT_FALSE(why_json.is_discarded()) << why_cli.out;
  std::vector<std::string> cli_reasons = why_json["reasons"];
  EXPECT_EQ(absl::StrJoin(cli_reasons, "; "), why);

  const std::string base = cluster.http_base();
  ASSERT_EQ(base.rfind("https://", 0), 0u) << base;
  // The dashboard takes the bearer token from the URL's fragment.
  const std::string token = "#token=" + cluster.admin_token();
  std::string overview = DumpDom(cluster, base + "/" + token);
  std::ofstream(ArtifactDir() + "/overview.html") << overview;
  EXPECT_NE(overview.find("data-loaded=\"1\""), std::string::npos) << "the page's script never rendered";
  EXPECT_NE(overview.find(absl::StrCat("<tr data-job=\"", running, "\" data-state=\"RUNNING\">")), std::string::npos)
      << overview;
  EXPECT_EQ(Count(overview, std::regex(absl::StrCat("class=\"gpu allocated\"[^>]*data-job=\"", running,
                                                    "\"[^>]*data-tenant=\"alice\" data-state=\"allocated\""))),
            2)
      << overview;
  EXPECT_NE(overview.find(absl::StrCat("<tr data-job=\"", pending, "\" data-state=\"PENDING\">")), std::string::npos);
  EXPECT_NE(overview.find(absl::StrCat("<td class=\"why\">", HtmlEscape(why), "</td>")), std::string::npos)
      << "why '" << why << "' not in the queue:\n" << overview;

  std::string job_page = DumpDom(cluster, base + "/job?id=" + running + token);
  std::ofstream(ArtifactDir() + "/job.html") << job_page;
  std::map<int64_t, double> steps = StepLosses(cluster, running);
  std::regex point("<tr data-step=\"(\\d+)\" data-loss=\"([^\"]+)\" data-attempt=\"1\">");
  int points = 0;
  for (auto it = std::sregex_iterator(job_page.begin(), job_page.end(), point); it != std::sregex_iterator(); ++it) {
    const int64_t step = std::stoll((*it)[1]);
    const double loss = std::stod((*it)[2]);
    ++points;
    auto line = steps.find(step);
    ASSERT_NE(line, steps.end()) << "charted step " << step << " has no step line in rank 0's log";
    EXPECT_EQ(loss, line->second) << "step " << step;
  }
  EXPECT_GE(points, 20);
  // The chart was given exactly those points.
  EXPECT_TRUE(std::regex_search(job_page, std::regex(absl::StrCat("id=\"loss-chart\"[^>]*data-points=\"", points, "\""))))
      << "loss chart does not hold the " << points << " points";

  // Screenshots, for people to look at; a blank page compresses to a few KiB.
  EXPECT_GT(Screenshot(cluster, base + "/" + token, ArtifactDir() + "/overview.png"), 20000u);
  EXPECT_GT(Screenshot(cluster, base + "/job?id=" + running + token, ArtifactDir() + "/job.png"), 20000u);

  // The job page's attempts timeline and log tail: preempt the job, and once
  // its second attempt has run a few steps the page shows attempt 1 ended
  // preempted, attempt 2 running, and the tails of both ranks' output.
  CliResult preempt = cluster.Cli({"preempt", running, "--grace", "10s"});
  ASSERT_EQ(preempt.exit_code, 0) << preempt.err;
  nlohmann::json record;
  ready = LocalCluster::WaitFor(
      [&] {
        record = GetJson(cluster, "/api/job?id=" + running);
        nlohmann::json history = GetJson(cluster, "/api/telemetry?job=" + running);
        if (record.is_null() || history.is_null() || record["state"] != "JOB_RUNNING" || record["attempt"] != 2) {
          return false;
        }
        int steps = 0;
        for (const nlohmann::json& s : history["samples"]) steps += s["attempt"] == 2 ? 1 : 0;
        return steps >= 3;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(ready) << "the job never ran a second attempt after its preemption: " << record.dump() << "\n"
                     << cluster.CoordinatorLog();
  // /api/job is the job as `athanor job --json` has it.
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump();
  EXPECT_EQ(record["attempts"][0]["outcome"], "preempted");
  EXPECT_GT(record["attempts"][0]["end_unix"].get<double>(), record["attempts"][0]["start_unix"].get<double>());
  EXPECT_EQ(record["attempts"][1]["outcome"], "");
  EXPECT_EQ(record["attempts"][1]["end_unix"].get<double>(), 0);
  EXPECT_GE(record["attempts"][1]["start_unix"].get<double>(), record["attempts"][0]["end_unix"].get<double>());

  std::string attempts_page = DumpDom(cluster, base + "/job?id=" + running + token);
  std::ofstream(ArtifactDir() + "/job-attempts.html") << attempts_page;
  auto nodes = [&](int i) {
    std::vector<std::string> n = record["attempts"][i]["nodes"];
    return absl::StrJoin(n, ", ");
  };
  EXPECT_NE(attempts_page.find(absl::StrCat("<li data-attempt=\"1\" data-outcome=\"preempted\">attempt 1 on ", nodes(0),
                                            ": preempted (preempted by an admin)")),
            std::string::npos) << attempts_page;
  EXPECT_NE(attempts_page.find(absl::StrCat("<li data-attempt=\"2\" data-outcome=\"running\">attempt 2 on ", nodes(1),
                                            ": RUNNING")),
            std::string::npos) << attempts_page;
  EXPECT_EQ(Count(attempts_page, std::regex("class=\"span span-preempted\" data-attempt=\"1\"")), 1);
  EXPECT_EQ(Count(attempts_page, std::regex("class=\"span span-running\" data-attempt=\"2\"")), 1);
  EXPECT_TRUE(std::regex_search(attempts_page, std::regex("id=\"timeline\" data-preemptions=\"1\" data-restarts=\"0\"")))
      << attempts_page;
  // The log tail: both ranks, and every line shown for rank 0 is a line of
  // `athanor logs ID --rank 0` (read after the page, so it holds them all).
  EXPECT_NE(attempts_page.find("id=\"logs\" data-ranks=\"2\""), std::string::npos);
  CliResult cli_logs = cluster.Cli({"logs", running, "--rank", "0"});
  ASSERT_EQ(cli_logs.exit_code, 0) << cli_logs.err;
  std::smatch pre;
  ASSERT_TRUE(std::regex_search(attempts_page, pre, std::regex("<pre class=\"log\" data-rank=\"0\">([^<]*)</pre>")))
      << attempts_page;
  const std::string tail = absl::StrReplaceAll(pre[1].str(), {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}});
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(tail, '\n', absl::SkipEmpty())) {
    ++lines;
    EXPECT_NE(cli_logs.out.find(absl::StrCat(line, "\n")), std::string::npos) << "not in athanor logs: " << line;
  }
  EXPECT_GE(lines, 3) << tail;
  EXPECT_LE(tail.size(), 4096u);
  EXPECT_GT(Screenshot(cluster, base + "/job?id=" + running + token, ArtifactDir() + "/job-attempts.png"), 20000u);
  EXPECT_EQ(cluster.Cli({"cancel", running}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
