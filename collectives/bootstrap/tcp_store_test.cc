#include "collectives/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

using ::testing::HasSubstr;

TEST(TcpStore, SetGetAddCheck) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "");
  auto b = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*(*a)->Check("k"), false);
  // b waits for a key that a sets afterwards.
  std::thread waiter([&] {
    auto v = (*b)->Get("k", std::chrono::seconds(10));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, std::string("va\0lue", 6));
  });
  ASSERT_TRUE((*a)->Set("k", std::string("va\0lue", 6)).ok());
  waiter.join();
  EXPECT_EQ(*(*a)->Check("k"), true);
  EXPECT_EQ(*(*a)->Add("n", 5), 5);
  EXPECT_EQ(*(*b)->Add("n", -2), 3);
}

// A listening socket bound by someone else (the agent) is served on as it
// is: the store never binds the port itself, so it is never free between.
TEST(TcpStore, ServesOnAnAdoptedListeningSocket) {
  int agent_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(bind(agent_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(agent_fd, 16), 0);
  socklen_t len = sizeof(addr);
  getsockname(agent_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  const std::string secret = "0123456789abcdef0123456789abcdef";

  auto wrong_port = TcpStoreServer::Start("127.0.0.1", port == 65535 ? 1 : port + 1,
                                          {.secret = secret, .listen_fd = agent_fd});
  EXPECT_EQ(wrong_port.status(),
            absl::InvalidArgumentError(absl::StrCat(
                "TCP store: the listening socket passed as descriptor ", agent_fd, " listens on port ", port,
                ", not on MASTER_PORT ", port == 65535 ? 1 : port + 1)));
  auto server = TcpStoreServer::Start("127.0.0.1", port, {.secret = secret, .listen_fd = agent_fd});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), port);
  EXPECT_EQ(fcntl(agent_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);  // not passed on to the rank's children
  auto c = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), secret);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*(*c)->Add("n", 7), 7);
  close(agent_fd);  // the server holds its own duplicate
  EXPECT_EQ(*(*c)->Add("n", 1), 8);

  int unbound = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(TcpStoreServer::Start("127.0.0.1", 0, {.listen_fd = unbound}).status(),
            absl::InvalidArgumentError(absl::StrCat("TCP store: the listening socket passed as descriptor ",
                                                    unbound, " is not a listening IPv4 TCP socket")));
  close(unbound);
}

TEST(TcpStore, GetTimesOutNamingTheKeyAndStaysUsable) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok());
  auto c = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "");
  ASSERT_TRUE(c.ok());
  auto v = (*c)->Get("never", std::chrono::milliseconds(50));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(), HasSubstr("'never'"));
  EXPECT_EQ(*(*c)->Add("n", 1), 1);
}

TEST(TcpStore, AllGatherNamesMissingRanks) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok());
  auto c = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Set("p/2", "two").ok());
  auto all = AllGatherThroughStore(c->get(), "p", 0, 4, "zero", std::chrono::milliseconds(100));
  EXPECT_EQ(all.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(all.status().message(), HasSubstr("rank(s) 1,3 of 4 did not join"));
}

TEST(TcpStore, ConnectTimesOutWhenNobodyListens) {
  auto c = TcpStoreClient::Connect("127.0.0.1", 1, std::chrono::milliseconds(30), "");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(c.status().message(), HasSubstr("127.0.0.1:1 not reachable"));
}

TEST(TcpStore, SecretAdmitsOnlyClientsThatPresentIt) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {.secret = secret});
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  auto good = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), secret);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE((*good)->Set("k", "v").ok());
  // Another secret: refused at connect, and the key is untouched.
  auto wrong = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5),
                                       "0123456789abcdef0123456789abcdeX");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(wrong.status().message(),
              HasSubstr(absl::StrCat("TCP store at 127.0.0.1:", port,
                                     ": the listener does not know this attempt's rendezvous secret")));
  // No secret: its first request is refused, saying why, and the connection closed.
  auto none = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), "");
  ASSERT_TRUE(none.ok());
  absl::Status set = (*none)->Set("k", "overwritten");
  EXPECT_EQ(set.code(), absl::StatusCode::kUnavailable) << set;
  EXPECT_THAT(set.message(), HasSubstr("requires this attempt's rendezvous secret and this client has none"));
  EXPECT_EQ((*none)->Get("k", std::chrono::seconds(1)).status().code(), absl::StatusCode::kUnavailable);
  auto value = (*good)->Get("k", std::chrono::seconds(5));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
}

// A store without a secret cannot prove one, so a client with one refuses
// it (a squatter could pass for it otherwise); the store records the refusal.
TEST(TcpStore, ClientWithSecretRefusesServerWithout) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {.secret = ""});
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  auto c = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), "s3cret-s3cret-s3cret");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(c.status().message(), HasSubstr(absl::StrCat("TCP store at 127.0.0.1:", port)));
  EXPECT_THAT(c.status().message(), HasSubstr("started without a rendezvous secret, while this rank has one"));
  std::vector<std::string> refused = (*server)->Refusals(1, std::chrono::seconds(10));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr("this store was started without one"));
  // Clients without a secret are served as before.
  auto plain = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE((*plain)->Set("a", "b").ok());
  EXPECT_EQ(*(*plain)->Get("a", std::chrono::seconds(5)), "b");
}

TEST(TcpStore, PortInUseSaysAnotherProcessListens) {
  int squatter = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(bind(squatter, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(squatter, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(squatter, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  auto server = TcpStoreServer::Start("127.0.0.1", port, {.secret = "0123456789abcdef0123456789abcdef"});
  close(squatter);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", port, ": address already in use; "
                                     "another process on this node (possibly another tenant's")));
}

}  // namespace
}  // namespace athanor

namespace athanor {
namespace {

// A raw connection to the server, to send frames no TcpStoreClient would.
class RawPeer {
 public:
  explicit RawPeer(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawPeer() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // True once the server has closed the connection; false when it is still
  // open after the watchdog (10 s).
  bool ClosedByServer() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return false;
      char buf[256];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string Frame(char op, uint32_t klen, const std::string& key, uint32_t vlen, const std::string& value) {
  std::string out(1, op);
  out.append(reinterpret_cast<const char*>(&klen), 4).append(key);
  out.append(reinterpret_cast<const char*>(&vlen), 4).append(value);
  return out;
}

class TcpStoreHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TcpStoreServer::Start("127.0.0.1", 0, {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  // The server still serves an honest client.
  void ExpectServing() {
    auto c = TcpStoreClient::Connect("127.0.0.1", server_->port(), std::chrono::seconds(5), "");
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Set("honest", "yes").ok());
    EXPECT_EQ(*(*c)->Get("honest", std::chrono::seconds(5)), "yes");
  }
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreHostile, KeyLengthThatWrapsIn32BitsDisconnectsThePeer) {
  // 9 + klen wraps to 1 in 32-bit arithmetic.
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Frame('S', 0xFFFFFFF8u, "", 0, "") + std::string(64, 'x')));
  EXPECT_TRUE(peer.ClosedByServer());
  ExpectServing();
}

TEST_F(TcpStoreHostile, OversizedValueLengthDisconnectsBeforeBuffering) {
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Frame('S', 1, "k", 0xF0000000u, "")));
  EXPECT_TRUE(peer.ClosedByServer());
  ExpectServing();
}

TEST_F(TcpStoreHostile, OversizedKeyLengthDisconnects) {
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Frame('G', 1u << 20, "", 0, "")));
  EXPECT_TRUE(peer.ClosedByServer());
  ExpectServing();
}

TEST_F(TcpStoreHostile, UnknownOpDisconnects) {
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Frame('?', 1, "k", 0, "")));
  EXPECT_TRUE(peer.ClosedByServer());
  ExpectServing();
}

TEST_F(TcpStoreHostile, AddOnAValueThatIsNotEightBytesFails) {
  auto c = TcpStoreClient::Connect("127.0.0.1", server_->port(), std::chrono::seconds(5), "");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Set("short", "abc").ok());
  auto added = (*c)->Add("short", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kFailedPrecondition) << added.status();
  EXPECT_THAT(added.status().message(), HasSubstr("'short'"));
  // The value is untouched and the connection still works.
  EXPECT_EQ(*(*c)->Get("short", std::chrono::seconds(5)), "abc");
  EXPECT_EQ(*(*c)->Add("n", 7), 7);
}

TEST_F(TcpStoreHostile, AddWithAShortDeltaDisconnects) {
  RawPeer peer(server_->port());
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send(Frame('A', 1, "n", 3, "abc")));
  EXPECT_TRUE(peer.ClosedByServer());
  ExpectServing();
}

TEST(TcpStore, MasterAddrMayBeAHostName) {
  // torchrun accepts a host name in MASTER_ADDR; this machine's own name
  // resolves through /etc/hosts.
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  auto server = TcpStoreServer::Start("0.0.0.0", 0, {});
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = TcpStoreClient::Connect(name, (*server)->port(), std::chrono::seconds(5), "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*(*c)->Add("n", 2), 2);
  auto bad = TcpStoreClient::Connect("no-such-host.invalid", 1, std::chrono::milliseconds(50), "");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("no-such-host.invalid"));
}

}  // namespace
}  // namespace athanor
