// A squatter on a master port (an outside attack's finding): a process of
// another tenant listens on the port the coordinator hands the victim's next
// attempt. Before the fix, rank 0 could not bind it and the victim's job
// failed ("Address already in use"). Now the agent binds the master port for
// rank 0 before the attempt's first rank starts, and finding it taken, gives
// the attempt (whose ranks are all on that node) a free port instead; rank 0
// serves on the socket the agent bound. The victim's 2-rank job succeeds, and
// the squatter is never even connected to, so it learns nothing.
//
// Real coordinator and sandboxed agent (root, as CI runs it); the cluster
// harness's watchdog bounds the test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

// Listens on 127.0.0.1:port and records every connection and byte it gets,
// until Stop(). Waits on poll (the listening socket and a stop pipe).
class Squatter {
 public:
  explicit Squatter(int port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
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
  int connections() const { return connections_; }
  const std::string& received() const { return received_; }

 private:
  void Serve() {
    std::vector<pollfd> fds = {{stop_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (;;) {
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++connections_;
          fds.push_back({c, POLLIN, 0});
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[4096];
        ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n > 0) {
          received_.append(buf, n);
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
  int connections_ = 0;   // written by the thread, read after Stop()
  std::string received_;  // likewise
};

TEST(SquattedPortTest, TheVictimsJobSucceedsAndTheSquatterLearnsNothing) {
  ASSERT_EQ(geteuid(), 0u) << "the sandbox needs root; CI runs this suite as root";
  const int port = PickUnusedPort();
  // Every attempt gets this one master port, so the squatter knows it.
  LocalCluster cluster({"--master-port-range", absl::StrCat(port, "-", port)});
  cluster.StartCoordinator();
  cluster.StartAgent("node-a", 2);
  ASSERT_TRUE(cluster.WaitForNodesUp(1));
  Squatter squatter(port);
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

}  // namespace
}  // namespace athanor::testing
