// Debian's real Prometheus scrapes a secure test cluster (coordinator and
// both agents, over HTTPS verified against the cluster CA) while a 2-rank
// training job runs; PromQL through its HTTP API
// gives the job's step rate and the GPUs allocated to its tenant, and
// `promtool check metrics` accepts every endpoint's exposition.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "tests/observability/obs_test_util.h"

namespace athanor::testing {
namespace {

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

// The vector result of an instant query (empty when none or on error).
std::string last_answer;  // the newest raw answer, for failure messages

nlohmann::json Query(LocalCluster& cluster, const std::string& prometheus, const std::string& promql) {
  HttpResult r = cluster.HttpGet(prometheus, "/api/v1/query?query=" + UrlEncode(promql));
  last_answer = absl::StrCat(r.status, " ", r.body);
  if (r.status != 200) return nlohmann::json::array();
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
  return j["data"]["result"];
}

double Value(const nlohmann::json& sample) { return std::stod(sample["value"][1].get<std::string>()); }

TEST(ObservabilityPrometheusTest, ScrapesStepRateAndTenantGpusDuringTraining) {
  LocalCluster cluster(OwnMasterPort());
  cluster.EnableHttp();
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  cluster.StartAgent("node-b", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));
  const std::string job = SubmitLongTraining(cluster, "alice", 2, 1);
  ASSERT_FALSE(job.empty());

  const std::string prometheus = absl::StrCat("127.0.0.1:", PickFreePort().value());
  const std::string config = cluster.dir() + "/prometheus.yml";
  // A secure cluster serves HTTPS: Prometheus verifies each endpoint against
  // the cluster CA and the name its certificate carries; the coordinator
  // wants an admin's bearer token for /metrics.
  const std::string token_file = cluster.dir() + "/scrape.token";
  std::ofstream(token_file) << cluster.admin_token();
  const std::string ca = cluster.tls_dir() + "/ca.crt";
  std::ofstream yml(config);
  yml << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
      << "scrape_configs:\n"
      << "  - job_name: athanor-coordinator\n    scheme: https\n"
      << "    tls_config:\n      ca_file: " << ca << "\n      server_name: coordinator.athanor\n"
      << "    authorization:\n      credentials_file: " << token_file << "\n"
      << "    static_configs:\n      - targets: ['" << cluster.http_address() << "']\n";
  for (const std::string node : {"node-a", "node-b"}) {
    yml << "  - job_name: athanor-agent-" << node << "\n    scheme: https\n"
        << "    tls_config:\n      ca_file: " << ca << "\n      server_name: " << node << ".node.athanor\n"
        << "    static_configs:\n      - targets: ['" << cluster.agent_metrics_address(node) << "']\n";
  }
  yml.close();
  SubprocessOptions o;
  o.argv = {"prometheus", "--config.file=" + config, "--storage.tsdb.path=" + cluster.dir() + "/tsdb",
            "--web.listen-address=" + prometheus, "--log.level=warn"};
  o.stdout_path = cluster.dir() + "/prometheus.log";
  o.stderr_path = "=stdout";
  auto server = Subprocess::Start(o);
  ASSERT_TRUE(server.ok()) << "prometheus (Debian package) is required: " << server.status();
  cluster.TrackHelper(server->get());
  // Stopped however the test ends (an ASSERT returns early).
  struct StopOnExit {
    Subprocess* p;
    ~StopOnExit() {
      p->Signal(SIGTERM).IgnoreError();
      p->Wait();
    }
  } stop{server->get()};

  // Every target is up, and the step rate shows once two scrapes saw steps.
  const std::string rate_query = absl::StrCat("rate(athanor_job_steps_total{job_id=\"", job, "\"}[5s])");
  nlohmann::json rate;
  bool seen = LocalCluster::WaitFor(
      [&] {
        rate = Query(cluster, prometheus, rate_query);
        return rate.size() == 1 && Value(rate[0]) > 0;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(seen) << "no step rate for job " << job << "; last answer: " << last_answer << "\nprometheus log:\n"
                    << ReadFile(cluster.dir() + "/prometheus.log") << "\ncoordinator log:\n"
                    << cluster.CoordinatorLog();
  EXPECT_EQ(rate[0]["metric"]["tenant"], "alice");
  // athanor-train takes >= 1 ms a step with this model: a rate past 1000/s is not a step rate.
  EXPECT_LT(Value(rate[0]), 1000);

  nlohmann::json up = Query(cluster, prometheus, "up");
  ASSERT_EQ(up.size(), 3u) << up.dump();
  for (const nlohmann::json& t : up) EXPECT_EQ(Value(t), 1) << t.dump();

  nlohmann::json gpus = Query(cluster, prometheus, "sum by (tenant) (athanor_node_gpus_allocated{tenant=\"alice\"})");
  ASSERT_EQ(gpus.size(), 1u) << gpus.dump();
  EXPECT_EQ(Value(gpus[0]), 2);
  nlohmann::json tenant = Query(cluster, prometheus, "athanor_tenant_gpus_allocated{tenant=\"alice\"}");
  ASSERT_EQ(tenant.size(), 1u) << tenant.dump();
  EXPECT_EQ(Value(tenant[0]), 2);
  // Each agent runs one rank of it.
  nlohmann::json ranks = Query(cluster, prometheus, "sum(athanor_agent_ranks_running)");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(Value(ranks[0]), 2);

  // promtool lints every endpoint's exposition.
  for (const std::string& address : {cluster.http_address(), cluster.agent_metrics_address("node-a"),
                                     cluster.agent_metrics_address("node-b")}) {
    HttpResult metrics = cluster.HttpGet(address, "/metrics");
    ASSERT_EQ(metrics.status, 200) << address;
    const std::string file = cluster.dir() + "/metrics-" + address.substr(address.rfind(':') + 1) + ".txt";
    std::ofstream(file) << metrics.body;
    CliResult check = RunTool({"sh", "-c", "promtool check metrics < '" + file + "'"}, cluster.dir() + "/promtool.err");
    EXPECT_EQ(check.exit_code, 0) << address << ": " << check.out << check.err;
  }
  EXPECT_EQ(cluster.Cli({"cancel", job}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
