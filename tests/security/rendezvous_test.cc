// The TCP store's rendezvous under the outside attack's finding: a tenant's
// process listens on the master port of another tenant's job. The victim's
// ranks must fail with a clear error and hand the squatter nothing from which
// the attempt's rendezvous secret follows; a store and a client with
// different secrets must both refuse; the same secret must work as before,
// without the secret ever crossing the wire. Threads in one process; every
// test has a watchdog.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectives/bootstrap/store_auth.h"
#include "collectives/bootstrap/store_protocol.h"
#include "collectives/bootstrap/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

namespace proto = store_protocol;
using ::testing::HasSubstr;
using ::testing::Not;

// An attempt's secret as the agent makes them: 64 hex characters.
const std::string kSecret = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const std::string kOtherSecret = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

// Aborts the test binary when a test outlives `limit`, so a hang fails fast.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          if (!done_.WaitForNotificationWithTimeout(absl::FromChrono(limit))) {
            std::fprintf(stderr, "watchdog: test still running after %lld s\n",
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    done_.Notify();
    thread_.join();
  }

 private:
  absl::Notification done_;
  std::thread thread_;
};

// Every form of the secret a recording must not hold.
void ExpectSecretAbsent(const std::string& recorded) {
  EXPECT_THAT(recorded, Not(HasSubstr(kSecret)));
  EXPECT_THAT(recorded, Not(HasSubstr(absl::BytesToHexString(kSecret))));
  std::string upper = absl::BytesToHexString(kSecret);
  for (char& c : upper) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  EXPECT_THAT(recorded, Not(HasSubstr(upper)));
  EXPECT_THAT(recorded, Not(HasSubstr(absl::HexStringToBytes(kSecret))));  // the hex read as bytes
}

int ListenLoopback() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 8) != 0) return -1;
  return fd;
}

int PortOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What the squatter answers to the first frame it receives.
enum class Squat {
  kAnswersOk,         // 'R', as a store of the old protocol answered the hello
  kForgesChallenge,   // a well-formed challenge with a made-up proof
  kClaimsHugeFrame,   // a challenge header claiming 60 MB, then junk
  kHangsUp,           // closes the connection
  kSilent,            // says nothing
};

// A process of another tenant on the port: accepts one connection and
// records every byte it receives until the client hangs up.
class Squatter {
 public:
  explicit Squatter(Squat how) : listen_fd_(ListenLoopback()), how_(how) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~Squatter() {
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
  }
  int port() const { return PortOf(listen_fd_); }
  // Waits for the client to hang up; what it sent.
  std::string Recorded() {
    thread_.join();
    EXPECT_TRUE(finished_) << "the client never hung up on the squatter";
    return recorded_;
  }

 private:
  void Serve() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::string inbox, error;
    proto::Frame frame;
    bool answered = false;
    for (;;) {
      pollfd q{fd, POLLIN, 0};
      if (poll(&q, 1, 10000) <= 0) break;
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        finished_ = true;
        break;
      }
      recorded_.append(buf, n);
      inbox.append(buf, n);
      if (answered || proto::Decode(&inbox, &frame, &error) != proto::DecodeResult::kFrame) continue;
      answered = true;
      std::string reply;
      switch (how_) {
        case Squat::kAnswersOk:
          reply = proto::Encode('R', "", "");
          break;
        case Squat::kForgesChallenge:
          reply = proto::Encode('N', "", std::string(64, '\x5a'));
          break;
        case Squat::kClaimsHugeFrame: {
          const uint32_t huge = 60u << 20;
          reply = std::string(1, 'N') + std::string(4, '\0') +
                  std::string(reinterpret_cast<const char*>(&huge), 4) + std::string(1000, 'j');
          break;
        }
        case Squat::kHangsUp:
          // Closing records the hello alone: the client cannot send more.
          finished_ = true;
          close(fd);
          return;
        case Squat::kSilent:
          break;
      }
      send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    }
    close(fd);
  }

  const int listen_fd_;
  const Squat how_;
  std::thread thread_;
  std::string recorded_;   // written by thread_ until it ends
  bool finished_ = false;  // likewise
};

// The hello of this protocol: 'H', the 21-byte label, a 32-byte nonce.
constexpr size_t kHelloBytes = 9 + 21 + 32;

class SquatterTest : public ::testing::TestWithParam<Squat> {};

TEST_P(SquatterTest, ClientFailsClearlyAndSendsNothingSecret) {
  Watchdog watchdog(std::chrono::seconds(30));
  Squatter squatter(GetParam());
  const int port = squatter.port();
  // A short timeout: the silent squatter is given up on when it passes.
  auto client = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::milliseconds(500), kSecret);
  const absl::StatusCode want = GetParam() == Squat::kSilent ? absl::StatusCode::kDeadlineExceeded
                                                             : absl::StatusCode::kPermissionDenied;
  EXPECT_EQ(client.status().code(), want) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr(absl::StrCat("TCP store at 127.0.0.1:", port, ": ")));
  if (GetParam() == Squat::kSilent) {
    EXPECT_THAT(client.status().message(),
                HasSubstr("did not prove within 500 ms that it knows this attempt's rendezvous secret "
                          "(possibly another tenant's process on the port"));
  } else {
    EXPECT_THAT(client.status().message(),
                HasSubstr("the listener does not know this attempt's rendezvous secret (possibly "
                          "another tenant's process on the port); nothing secret was sent to it"));
  }
  client = absl::UnknownError("dropped");  // hangs up, if the old client had connected
  const std::string recorded = squatter.Recorded();
  ExpectSecretAbsent(recorded);
  // Exactly one hello: a label and a nonce, nothing more.
  ASSERT_EQ(recorded.size(), kHelloBytes);
  std::string inbox = recorded, error;
  proto::Frame hello;
  ASSERT_EQ(proto::Decode(&inbox, &hello, &error), proto::DecodeResult::kFrame);
  EXPECT_EQ(hello.op, 'H');
  EXPECT_EQ(hello.key, "athanor-store-auth-v2");
  EXPECT_EQ(hello.value.size(), 32u);
}

INSTANTIATE_TEST_SUITE_P(Rendezvous, SquatterTest,
                         ::testing::Values(Squat::kAnswersOk, Squat::kForgesChallenge,
                                           Squat::kClaimsHugeFrame, Squat::kHangsUp, Squat::kSilent),
                         [](const ::testing::TestParamInfo<Squat>& info) {
                           switch (info.param) {
                             case Squat::kAnswersOk: return "AnswersOk";
                             case Squat::kForgesChallenge: return "ForgesChallenge";
                             case Squat::kClaimsHugeFrame: return "ClaimsHugeFrame";
                             case Squat::kHangsUp: return "HangsUp";
                             case Squat::kSilent: return "Silent";
                           }
                           return "Unknown";
                         });

// Reads one frame from `fd` (10 s at most); op 0 when the peer hung up.
proto::Frame ReadFrame(int fd) {
  std::string inbox, error;
  proto::Frame frame;
  for (;;) {
    if (proto::Decode(&inbox, &frame, &error) == proto::DecodeResult::kFrame) return frame;
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    ssize_t n = poll(&p, 1, 10000) > 0 ? recv(fd, buf, sizeof(buf), 0) : 0;
    if (n <= 0) return proto::Frame{};
    inbox.append(buf, n);
  }
}

bool Send(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

TEST(Rendezvous, StoreAndClientWithDifferentSecretsBothRefuse) {
  Watchdog watchdog(std::chrono::seconds(30));
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {.secret = kSecret});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto owner = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), kSecret);
  ASSERT_TRUE(owner.ok()) << owner.status();
  ASSERT_TRUE((*owner)->Set("addr", "rank0").ok());

  // The client: the store's proof does not match its secret.
  auto other = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), kOtherSecret);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied) << other.status();
  EXPECT_THAT(other.status().message(),
              HasSubstr(absl::StrCat("TCP store at 127.0.0.1:", port,
                                     ": the listener does not know this attempt's rendezvous secret")));
  EXPECT_THAT(other.status().message(), HasSubstr("the listener's proof does not match"));
  // The store: that client hung up without proving the secret.
  std::vector<std::string> refused = (*server)->Refusals(1, std::chrono::seconds(10));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr(absl::StrCat("TCP store on port ", port, " refused 127.0.0.1:")));
  EXPECT_THAT(refused[0], HasSubstr("hung up during the rendezvous handshake without proving the secret"));

  // A peer that goes on and proves the other secret is refused by the store,
  // which says so and hangs up.
  int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  const std::string nonce(32, '\x11');
  ASSERT_TRUE(Send(fd, proto::Encode('H', store_auth::kAuthLabel, nonce)));
  proto::Frame challenge = ReadFrame(fd);
  ASSERT_EQ(challenge.op, 'N');
  ASSERT_EQ(challenge.value.size(), 64u);
  const std::string store_nonce = challenge.value.substr(0, 32);
  EXPECT_EQ(challenge.value.substr(32),
            store_auth::Mac(kSecret, store_auth::Direction::kStoreProves, nonce, store_nonce));
  ASSERT_TRUE(Send(fd, proto::Encode('P', "", store_auth::Mac(kOtherSecret, store_auth::Direction::kClientProves,
                                                               nonce, store_nonce))));
  proto::Frame verdict = ReadFrame(fd);
  EXPECT_EQ(verdict.op, 'D');
  EXPECT_EQ(verdict.key, store_auth::kDeniedBadProof);
  EXPECT_EQ(ReadFrame(fd).op, 0) << "the store keeps talking to a peer it refused";
  close(fd);
  refused = (*server)->Refusals(2, std::chrono::seconds(10));
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_THAT(refused[1], HasSubstr("its proof does not match this attempt's rendezvous secret"));

  EXPECT_EQ(*(*owner)->Get("addr", std::chrono::seconds(5)), "rank0");
}

TEST(Rendezvous, StoreRefusesReplayedAndReflectedProofs) {
  Watchdog watchdog(std::chrono::seconds(30));
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {.secret = kSecret});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string nonce(32, '\x22');
  // A proof seen on one connection (computed here as a rank would)...
  int first = ConnectLoopback(port);
  ASSERT_TRUE(Send(first, proto::Encode('H', store_auth::kAuthLabel, nonce)));
  proto::Frame c1 = ReadFrame(first);
  ASSERT_EQ(c1.value.size(), 64u);
  const std::string seen =
      store_auth::Mac(kSecret, store_auth::Direction::kClientProves, nonce, c1.value.substr(0, 32));
  close(first);
  // ...does not pass on another, even with the same client nonce.
  int replay = ConnectLoopback(port);
  ASSERT_TRUE(Send(replay, proto::Encode('H', store_auth::kAuthLabel, nonce)));
  proto::Frame c2 = ReadFrame(replay);
  ASSERT_EQ(c2.value.size(), 64u);
  EXPECT_NE(c2.value.substr(0, 32), c1.value.substr(0, 32)) << "the store reused its nonce";
  ASSERT_TRUE(Send(replay, proto::Encode('P', "", seen)));
  EXPECT_EQ(ReadFrame(replay).key, store_auth::kDeniedBadProof);
  close(replay);
  // Nor does the store's own proof sent back to it.
  int reflect = ConnectLoopback(port);
  ASSERT_TRUE(Send(reflect, proto::Encode('H', store_auth::kAuthLabel, nonce)));
  proto::Frame c3 = ReadFrame(reflect);
  ASSERT_EQ(c3.value.size(), 64u);
  ASSERT_TRUE(Send(reflect, proto::Encode('P', "", c3.value.substr(32))));
  EXPECT_EQ(ReadFrame(reflect).key, store_auth::kDeniedBadProof);
  close(reflect);
  // An old-style hello carrying the secret itself is refused too.
  int old = ConnectLoopback(port);
  ASSERT_TRUE(Send(old, proto::Encode('H', "", kSecret)));
  EXPECT_EQ(ReadFrame(old).key, store_auth::kDeniedBadHello);
  close(old);
  std::vector<std::string> refused = (*server)->Refusals(4, std::chrono::seconds(10));
  ASSERT_EQ(refused.size(), 4u);
  EXPECT_THAT(refused[0], HasSubstr("hung up during the rendezvous handshake"));
  EXPECT_THAT(refused[1], HasSubstr("its proof does not match"));
  EXPECT_THAT(refused[2], HasSubstr("its proof does not match"));
  EXPECT_THAT(refused[3], HasSubstr("its hello is not a athanor-store-auth-v2 challenge"));
}

// Forwards one connection to the store and records both directions.
class RecordingRelay {
 public:
  explicit RecordingRelay(int store_port) : listen_fd_(ListenLoopback()), store_port_(store_port) {
    thread_ = std::thread([this] { Relay(); });
  }
  ~RecordingRelay() {
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
  }
  int port() const { return PortOf(listen_fd_); }
  // Waits for either side to hang up; the bytes each way.
  std::pair<std::string, std::string> Recorded() {
    thread_.join();
    return {to_store_, to_client_};
  }

 private:
  void Relay() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return;
    int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    int store = ConnectLoopback(store_port_);
    for (;;) {
      pollfd q[2] = {{client, POLLIN, 0}, {store, POLLIN, 0}};
      if (poll(q, 2, 10000) <= 0) break;
      char buf[4096];
      ssize_t n = 0;
      if (q[0].revents) {
        n = recv(client, buf, sizeof(buf), 0);
        if (n <= 0 || !Send(store, std::string(buf, n))) break;
        to_store_.append(buf, n);
      }
      if (q[1].revents) {
        n = recv(store, buf, sizeof(buf), 0);
        if (n <= 0 || !Send(client, std::string(buf, n))) break;
        to_client_.append(buf, n);
      }
    }
    close(client);
    close(store);
  }

  const int listen_fd_;
  const int store_port_;
  std::thread thread_;
  std::string to_store_, to_client_;  // written by thread_ until it ends
};

TEST(Rendezvous, SameSecretWorksAsBeforeAndNeverCrossesTheWire) {
  Watchdog watchdog(std::chrono::seconds(30));
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {.secret = kSecret});
  ASSERT_TRUE(server.ok()) << server.status();
  RecordingRelay relay((*server)->port());
  {
    auto rank1 = TcpStoreClient::Connect("127.0.0.1", relay.port(), std::chrono::seconds(5), kSecret);
    ASSERT_TRUE(rank1.ok()) << rank1.status();
    auto rank0 = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), kSecret);
    ASSERT_TRUE(rank0.ok()) << rank0.status();
    EXPECT_EQ(*(*rank1)->Check("k"), false);
    ASSERT_TRUE((*rank1)->Set("k", std::string("va\0lue", 6)).ok());
    EXPECT_EQ(*(*rank0)->Get("k", std::chrono::seconds(5)), std::string("va\0lue", 6));
    EXPECT_EQ(*(*rank1)->Check("k"), true);
    EXPECT_EQ(*(*rank0)->Add("n", 5), 5);
    EXPECT_EQ(*(*rank1)->Add("n", -2), 3);
    ASSERT_TRUE((*rank0)->Set("p/0", "zero").ok());
    auto gathered = AllGatherThroughStore(rank1->get(), "p", 1, 2, "one", std::chrono::seconds(5));
    ASSERT_TRUE(gathered.ok()) << gathered.status();
    EXPECT_EQ(*gathered, (std::vector<std::string>{"zero", "one"}));
  }
  auto [to_store, to_client] = relay.Recorded();
  EXPECT_GT(to_store.size(), kHelloBytes);
  ExpectSecretAbsent(to_store);
  ExpectSecretAbsent(to_client);
  EXPECT_EQ((*server)->Refusals(0, std::chrono::milliseconds(0)).size(), 0u);
}

}  // namespace
}  // namespace athanor
