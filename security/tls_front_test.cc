// TlsFront against a real HTTP backend (HttpServer on loopback) with the
// cluster CA's coordinator certificate: HTTPS requests reach the backend and
// come back whole; plain HTTP, garbage and a peer that never finishes its
// handshake are closed without an answer and the front keeps serving; more
// than max_connections are closed on accept; stopping ends open connections.
#include "security/tls_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/http_server.h"
#include "security/cluster_ca.h"
#include "security/tls.h"
#include "security/tls_client.h"

namespace athanor::security {
namespace {

class TlsFrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/athanor_tls_front_test.XXXXXX";
    dir_ = std::string(mkdtemp(dir)) + "/ca";
    ASSERT_TRUE(InitClusterCa(dir_).ok());
    absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(dir_, "coordinator");
    ASSERT_TRUE(m.ok()) << m.status();
    material_ = *m;
    HttpServer::Options o;
    o.listen = "127.0.0.1:0";
    backend_ = std::make_unique<HttpServer>(o);
    backend_->Route("/big", [](const HttpRequest&) {
      return HttpResponse{200, "text/plain", std::string(3 << 20, 'x'), ""};
    });
    backend_->Route("/", [](const HttpRequest& r) {
      return HttpResponse{200, "text/plain", "hello " + r.authorization, ""};
    });
    ASSERT_TRUE(backend_->Start().ok());
  }

  std::unique_ptr<TlsFront> Front(int max_connections = 8,
                                  std::chrono::milliseconds handshake = std::chrono::seconds(10)) {
    TlsFrontOptions o;
    o.listen = "127.0.0.1:0";
    o.cert_pem = material_.cert_pem;
    o.key_pem = material_.key_pem;
    o.backend_port = backend_->port();
    o.max_connections = max_connections;
    o.handshake_timeout = handshake;
    absl::StatusOr<std::unique_ptr<TlsFront>> f = TlsFront::Start(o);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }

  std::string Get(const TlsFront& f, const std::string& path, const std::string& name = kCoordinatorName) {
    absl::StatusOr<std::string> r =
        TlsExchange("127.0.0.1:" + std::to_string(f.port()), material_.ca_pem, name,
                    "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0k\r\nConnection: close\r\n\r\n");
    return r.ok() ? *r : "error: " + std::string(r.status().message());
  }

  // A plain TCP connection to the front.
  static int Connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{20, 0};  // a front that never closes fails the read, not the test binary
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    return fd;
  }

  // Sends `bytes` and reads until the front closes; what came back.
  static std::string SendRaw(int port, const std::string& bytes) {
    int fd = Connect(port);
    EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    close(fd);
    return out;
  }

  std::string dir_;
  TlsMaterial material_;
  std::unique_ptr<HttpServer> backend_;
};

TEST_F(TlsFrontTest, RelaysRequestsAndAnswersWhole) {
  auto front = Front();
  ASSERT_NE(front, nullptr);
  std::string r = Get(*front, "/hello");
  EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(r.substr(r.size() - 16), "hello Bearer t0k");
  std::string big = Get(*front, "/big");
  ASSERT_GT(big.size(), 3u << 20);
  EXPECT_EQ(big.substr(big.size() - (3 << 20)), std::string(3 << 20, 'x'));
  EXPECT_EQ(front->stats().accepted, 2);
}

TEST_F(TlsFrontTest, CertificateNamesTheCoordinator) {
  auto front = Front();
  ASSERT_NE(front, nullptr);
  std::string r = Get(*front, "/", AgentName("node-a"));
  EXPECT_EQ(r.rfind("error: TLS handshake", 0), 0u) << r;
}

TEST_F(TlsFrontTest, PlainHttpAndGarbageAreClosedAndServingGoesOn) {
  auto front = Front();
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(SendRaw(front->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/"), std::string::npos);
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  SendRaw(front->port(), garbage);
  // A TLS record header announcing a huge handshake message, then nothing.
  SendRaw(front->port(), std::string("\x16\x03\x01\xff\xff\x01\xff\xff\xff", 9));
  EXPECT_EQ(front->stats().handshake_failures, 3);
  EXPECT_EQ(Get(*front, "/after").substr(0, 15), "HTTP/1.1 200 OK");
}

TEST_F(TlsFrontTest, SilentPeerIsClosedAfterHandshakeTimeout) {
  auto front = Front(8, std::chrono::milliseconds(300));
  ASSERT_NE(front, nullptr);
  int fd = Connect(front->port());
  char c;
  EXPECT_EQ(read(fd, &c, 1), 0);  // closed by the front, not by our 20 s read timeout
  close(fd);
  EXPECT_EQ(front->stats().handshake_failures, 1);
  EXPECT_EQ(Get(*front, "/after").substr(0, 15), "HTTP/1.1 200 OK");
}

TEST_F(TlsFrontTest, ConnectionsBeyondTheBoundAreClosed) {
  auto front = Front(2);
  ASSERT_NE(front, nullptr);
  int a = Connect(front->port());
  int b = Connect(front->port());
  int c = Connect(front->port());
  char byte;
  EXPECT_EQ(read(c, &byte, 1), 0);  // the third: closed on accept
  EXPECT_EQ(front->stats().over_limit, 1);
  close(a);
  close(b);
  close(c);
}

TEST_F(TlsFrontTest, StoppingEndsOpenConnections) {
  auto front = Front();
  ASSERT_NE(front, nullptr);
  int fd = Connect(front->port());  // mid-handshake: the front holds it open
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (front->stats().open != 1 && std::chrono::steady_clock::now() < give_up) sched_yield();
  ASSERT_EQ(front->stats().open, 1);
  front.reset();  // returns: the connection's thread ended
  char byte;
  EXPECT_EQ(read(fd, &byte, 1), 0);
  close(fd);
}

TEST_F(TlsFrontTest, RefusesBadMaterial) {
  TlsFrontOptions o;
  o.listen = "127.0.0.1:0";
  o.cert_pem = material_.cert_pem;
  o.key_pem = "not a key";
  o.backend_port = backend_->port();
  absl::StatusOr<std::unique_ptr<TlsFront>> f = TlsFront::Start(o);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  o.key_pem = material_.key_pem;
  o.listen = "127.0.0.1:notaport";
  EXPECT_EQ(TlsFront::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor::security
