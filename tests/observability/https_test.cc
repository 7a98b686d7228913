// A secure cluster's HTTP endpoints speak only HTTPS: a plain-HTTP request or
// garbage sent to the coordinator's or an agent's port gets no HTTP answer
// (the connection is closed), and the daemons go on serving HTTPS and gRPC.
// A client expecting another certificate name is refused by verification.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "security/cluster_ca.h"
#include "security/tls_client.h"
#include "tests/observability/obs_test_util.h"

namespace athanor::testing {
namespace {

// Sends `bytes` to ADDRESS and reads until the server closes (or 10 s pass).
std::string SendRaw(const std::string& address, const std::string& bytes) {
  size_t colon = address.rfind(':');
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(colon + 1), &port)) << address;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  } else {
    out = "cannot connect";
  }
  close(fd);
  return out;
}

TEST(ObservabilityHttpsTest, PlainHttpAndGarbageAreRefusedAndServingGoesOn) {
  LocalCluster cluster;
  cluster.EnableHttp();
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  ASSERT_EQ(cluster.http_base().rfind("https://", 0), 0u);
  const std::string coordinator = cluster.http_address();
  const std::string agent = cluster.agent_metrics_address("node-a");
  // Both answer over HTTPS first.
  ASSERT_EQ(cluster.HttpGet(coordinator, "/metrics").status, 200) << cluster.CoordinatorLog();
  ASSERT_EQ(cluster.HttpGet(agent, "/metrics").status, 200);

  std::string garbage;
  for (int i = 0; i < 8192; ++i) garbage.push_back(static_cast<char>((i * 197 + 11) & 0xff));
  const std::string plain = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (const std::string& address : {coordinator, agent}) {
    for (int round = 0; round < 3; ++round) {
      std::string answer = SendRaw(address, plain);
      EXPECT_EQ(answer.find("HTTP/"), std::string::npos) << address << " answered plain HTTP: " << answer;
      EXPECT_EQ(answer.find("athanor_"), std::string::npos) << address;
      answer = SendRaw(address, garbage);
      EXPECT_EQ(answer.find("HTTP/"), std::string::npos) << address;
    }
  }
  // Verification pins the certificate's name: the coordinator's port is not a node's.
  absl::StatusOr<std::string> wrong =
      security::TlsExchange(coordinator, ReadFile(cluster.tls_dir() + "/ca.crt"), security::AgentName("node-a"),
                            "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(wrong.ok());

  // The daemons are alive and serve as before.
  EXPECT_EQ(kill(cluster.agent_pid("node-a"), 0), 0);
  // The node gauges come from the cluster view, which is published after a
  // scheduling pass: the first one after the node came up may still be due.
  HttpResult after;
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] {
        after = cluster.HttpGet(coordinator, "/metrics");
        return after.status == 200 && after.body.find("athanor_nodes{") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << after.status << " " << after.body.substr(0, 400);
  HttpResult agent_after = cluster.HttpGet(agent, "/metrics");
  EXPECT_EQ(agent_after.status, 200);
  EXPECT_NE(agent_after.body.find("athanor_agent_ranks_running"), std::string::npos);
  CliResult nodes = cluster.Cli({"nodes"});
  EXPECT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("node-a"), std::string::npos);
}

}  // namespace
}  // namespace athanor::testing
