// S3ObjectStore against a scripted HTTP server on loopback that answers
// every request with one fixed response: listings that a real server would
// never send, but a broken or hostile one can.
#include "checkpoint/s3/s3_object_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace athanor {
namespace {

// Serves `body` (HTTP 200) to every request until destroyed.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::string body) : body_(std::move(body)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      while (!stop_) {
        size_t end = in.find("\r\n\r\n");
        if (end != std::string::npos) {
          in.erase(0, end + 4);
          ++requests_;
          std::string reply = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: ",
                                           body_.size(), "\r\n\r\n", body_);
          if (send(c, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) break;
          continue;
        }
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 100) <= 0) continue;
        ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        in.append(buf, n);
      }
      close(c);
    }
  }

  const std::string body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

std::unique_ptr<S3ObjectStore> StoreFor(const ScriptedServer& server, const std::string& prefix) {
  auto options = ParseS3Options(absl::StrCat("s3://b/", prefix, "?endpoint=http://127.0.0.1:", server.port(),
                                             "&access_key=k&secret_key=s&max_attempts=1"),
                                {});
  EXPECT_TRUE(options.ok()) << options.status();
  return std::make_unique<S3ObjectStore>(*options);
}

// Before, List() followed the same token for ever (and kept every page).
TEST(S3ObjectStoreHostile, ARepeatedContinuationTokenEndsTheListing) {
  ScriptedServer server(
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>again</NextContinuationToken>"
      "<Contents><Key>p/k</Key><Size>1</Size></Contents></ListBucketResult>");
  auto store = StoreFor(server, "p");
  auto listed = store->List("");
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kDataLoss) << listed.status();
  EXPECT_NE(listed.status().message().find("'again'"), absl::string_view::npos) << listed.status();
  EXPECT_EQ(server.requests(), 2);
}

// Before, a key shorter than the prefix threw std::out_of_range out of List().
TEST(S3ObjectStoreHostile, AKeyShorterThanThePrefixIsDataLoss) {
  ScriptedServer server(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>p</Key><Size>1</Size></Contents></ListBucketResult>");
  auto store = StoreFor(server, "long/prefix");
  auto listed = store->List("");
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kDataLoss) << listed.status();
}

// Before, a response body was kept whole however large: a server (or one
// named by a tenant's endpoint) could fill the reader's memory. Now a listing
// takes at most kMaxMetadataBody and an object GET its range or max_object_mb.
TEST(S3ObjectStoreHostile, AResponseBodyPastItsBoundFailsTheRequest) {
  ScriptedServer server(std::string(3 << 20, 'x'));  // 3 MiB to every request
  auto options = ParseS3Options(absl::StrCat("s3://b/p?endpoint=http://127.0.0.1:", server.port(),
                                             "&access_key=k&secret_key=s&max_attempts=3&max_object_mb=2"),
                                {});
  ASSERT_TRUE(options.ok()) << options.status();
  S3ObjectStore store(*options);
  auto whole = store.Get("k", 0, -1);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kResourceExhausted) << whole.status();
  EXPECT_NE(whole.status().message().find("the response body is over 2097152 bytes"), absl::string_view::npos)
      << whole.status();
  EXPECT_EQ(server.requests(), 1) << "a body over its bound is not retried";
  auto ranged = store.Get("k", 0, 10);
  EXPECT_EQ(ranged.status().code(), absl::StatusCode::kResourceExhausted) << ranged.status();
  EXPECT_NE(ranged.status().message().find("over 10 bytes"), absl::string_view::npos) << ranged.status();
  EXPECT_EQ(server.requests(), 2);
}

}  // namespace
}  // namespace athanor
