// A squatter on a master port (an outside attack's finding): a process of
// another tenant listens on the port the coordinator hands the victim's next
// attempt. Before the fix, rank 0 could not bind it and the victim's job
// failed ("Address already in use"). Now the agent binds the master port for
// rank 0 before the attempt's first rank starts, and finding it taken, gives
// the attempt (whose ranks are all on that node) a free port instead; rank 0
// serves on the socket the agent bound. The victim's 2-rank job succeeds, and
// the squatter is never even connected to, so it learns nothing.
//
// When the attempt spans nodes, the agent cannot move the port alone: the
// ranks on rank 0's node fail to start saying the port is taken, and the
// coordinator requeues the attempt without using a restart, on the range's
// next port and with rank 0 on another node (MultiNode... below).
//
// Real coordinator and sandboxed agent (root, as CI runs it); the cluster
// harness's watchdog bounds the test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "collectives/bootstrap/store_auth.h"
#include "collectives/bootstrap/store_protocol.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// Listens on address:port and records every connection and byte it gets,
// until Stop(). Waits on poll (the listening socket and a stop pipe).
class Squatter {
 public:
  Squatter(const std::string& address, int port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
    listening_ = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                 listen(listen_fd_, 64) == 0 && pipe(stop_) == 0;
    if (listening_) thread_ = std::thread([this] { Serve(); });
  }
  ~Squatter() { Stop(); }
  bool listening() const { return listening_; }
  void Stop() {
    if (!thread_.joinable()) return;
    (void)!write(stop_[1], "x", 1);
    thread_.join();
    close(listen_fd_);
    close(stop_[0]);
    close(stop_[1]);
  }
  int connections() const { return static_cast<int>(streams_.size()); }
  std::string received() const {
    std::string all;
    for (const std::string& s : streams_) all += s;
    return all;
  }
  // What each connection sent, in the order they came.
  const std::vector<std::string>& streams() const { return streams_; }

 private:
  void Serve() {
    std::vector<pollfd> fds = {{stop_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (;;) {
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          streams_.emplace_back();
          fds.push_back({c, POLLIN, 0});
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[4096];
        ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n > 0) {
          streams_[i - 2].append(buf, n);
        } else {
          close(fds[i].fd);
          fds[i].fd = -1;  // poll ignores it from now on
        }
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].fd >= 0) close(fds[i].fd);
    }
  }

  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  bool listening_ = false;
  std::thread thread_;
  std::vector<std::string> streams_;  // written by the thread, read after Stop()
};

TEST(SquattedPortTest, TheVictimsJobSucceedsAndTheSquatterLearnsNothing) {
  ASSERT_EQ(geteuid(), 0u) << "the sandbox needs root; CI runs this suite as root";
  const int port = PickUnusedPort();
  // Every attempt gets this one master port, so the squatter knows it.
  LocalCluster cluster({"--master-port-range", absl::StrCat(port, "-", port)});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 2);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  Squatter squatter("127.0.0.1", port);
  ASSERT_TRUE(squatter.listening()) << "port " << port;

  const std::string probe = std::string(getenv("ATHANOR_BIN_DIR")) + "/rendezvous_rank";
  CliResult submit = cluster.Cli({"submit", "--nodes", "1", "--gpus-per-node", "2", "--", probe});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = submit.out.substr(0, submit.out.find('\n'));
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "60"});
  squatter.Stop();
  const std::string node = cluster.dir() + "/node-a/jobs/" + id + "/attempt-1/";
  const std::string agent_log = ReadFile(cluster.dir() + "/agent-node-a.log");
  const std::string log0 = ReadFile(node + "rank-0.log"), log1 = ReadFile(node + "rank-1.log");
  EXPECT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << log0 << log1 << agent_log;
  // Both ranks met on the port the agent bound instead of the squatted one.
  const std::string moved = absl::StrCat("master port ", port, " is in use on this node");
  ASSERT_NE(agent_log.find(moved), std::string::npos) << agent_log;
  const size_t at = agent_log.find("rendezvous on port ", agent_log.find(moved));
  ASSERT_NE(at, std::string::npos) << agent_log;
  const int other = std::stoi(agent_log.substr(at + std::string("rendezvous on port ").size()));
  EXPECT_NE(other, port);
  EXPECT_EQ(log0, absl::StrCat("rank 0: rendezvous ok on port ", other, ": rank-0,rank-1\n"));
  EXPECT_EQ(log1, absl::StrCat("rank 1: rendezvous ok on port ", other, ": rank-0,rank-1\n"));
  // The squatter was never connected to: no byte of any handshake reached it.
  EXPECT_EQ(squatter.connections(), 0);
  EXPECT_EQ(squatter.received(), "");
}

// Two nodes, as two hosts: agents on this machine at their own loopback
// addresses (each agent binds the master port at its node's address, so a
// squatter on node A's address does not hold node B's). The squatter listens
// on every port of the coordinator's two-port master range at node A's
// address. The victim's first attempt puts rank 0 on node A: its ranks there
// fail to start saying the port is taken, the attempt is requeued without a
// restart (the job has none), and the next one gets the range's other port
// with rank 0 on node B. Before the fix the job failed at its first attempt.
TEST(SquattedPortTest, AMultiNodeVictimIsRequeuedWithRankZeroElsewhereAndSucceeds) {
  ASSERT_EQ(geteuid(), 0u) << "the sandbox needs root; CI runs this suite as root";
  const std::string host_a = "127.0.0.2", host_b = "127.0.0.3";
  const int port = PickUnusedPort();
  Squatter first(host_a, port), second(host_a, port + 1);
  ASSERT_TRUE(first.listening()) << host_a << ":" << port;
  ASSERT_TRUE(second.listening()) << host_a << ":" << port + 1;
  LocalCluster cluster({"--master-port-range", absl::StrCat(port, "-", port + 1)});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 1, host_a);  // registered first: the placement's first node
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  cluster.StartAgent("node-b", 1, host_b);
  ASSERT_TRUE(cluster.WaitForNodesUp(2));

  const std::string probe = std::string(getenv("ATHANOR_BIN_DIR")) + "/rendezvous_rank";
  CliResult submit = cluster.Cli(
      {"submit", "--nodes", "2", "--gpus-per-node", "1", "--max-restarts", "0", "--", probe});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = submit.out.substr(0, submit.out.find('\n'));
  CliResult wait = cluster.Cli({"wait", id, "--timeout", "90"});
  first.Stop();
  second.Stop();
  const std::string jobs_a = cluster.dir() + "/node-a/jobs/" + id, jobs_b = cluster.dir() + "/node-b/jobs/" + id;
  const std::string agent_a = ReadFile(cluster.dir() + "/agent-node-a.log");
  const std::string agent_b = ReadFile(cluster.dir() + "/agent-node-b.log");
  const std::string coordinator = ReadFile(cluster.dir() + "/coordinator.log");
  ASSERT_EQ(wait.out, "job " + id + " SUCCEEDED\n") << agent_a << agent_b << coordinator;
  // Attempt 1: rank 0 on node A could not start; the reason names the port.
  const std::string taken = absl::StrCat(
      "athanor-agent: the rank failed to start: cannot serve the attempt's rendezvous: master port ", port,
      " is in use on this node: another process (possibly another tenant's, squatting on it) listens there; "
      "ranks on other nodes expect the store on that port, so this attempt cannot rendezvous (its next one "
      "gets another port)\n");
  EXPECT_EQ(ReadFile(jobs_a + "/attempt-1/rank-0.log"), taken);
  // Attempt 2: rank 0 on node B, on the range's other port; no restart used,
  // and node A (not drained: nothing counted against it) ran rank 1.
  EXPECT_EQ(ReadFile(jobs_b + "/attempt-2/rank-0.log"),
            absl::StrCat("rank 0: rendezvous ok on port ", port + 1, ": rank-0,rank-1\n"));
  EXPECT_EQ(ReadFile(jobs_a + "/attempt-2/rank-1.log"),
            absl::StrCat("rank 1: rendezvous ok on port ", port + 1, ": rank-0,rank-1\n"));
  EXPECT_FALSE(std::filesystem::exists(jobs_a + "/attempt-3")) << coordinator;
  EXPECT_FALSE(std::filesystem::exists(jobs_b + "/attempt-3")) << coordinator;
  EXPECT_NE(coordinator.find(absl::StrCat("job ", id, " -> PENDING: requeued after attempt 1: another process "
                                          "holds the master port on node node-a: requeued with another port "
                                          "and rank 0 elsewhere where it can be, using no restart (1 of 3)")),
            std::string::npos)
      << coordinator;
  // The squatter learned nothing. Nobody connected to the second port (node
  // B served it). On the first, attempt 1's rank 1 on node B may have
  // connected before its attempt was stopped (it starts when rank 0 does,
  // and the coordinator is told of rank 0's failure only after): then it sent
  // one hello, the exchange's label and 32 fresh random bytes, and nothing
  // derived from the secret (the store proves itself first; store_auth.h).
  EXPECT_EQ(second.connections(), 0);
  EXPECT_EQ(second.received(), "");
  ASSERT_LE(first.connections(), 1);
  const std::string hello = store_protocol::Encode(store_protocol::kHello, store_auth::kAuthLabel,
                                          std::string(store_auth::kNonceBytes, '\0'));
  for (const std::string& stream : first.streams()) {
    ASSERT_EQ(stream.size(), hello.size());
    EXPECT_EQ(stream.substr(0, hello.size() - store_auth::kNonceBytes),
              hello.substr(0, hello.size() - store_auth::kNonceBytes));
  }
}

}  // namespace
}  // namespace athanor::testing
