#include "collectives/bootstrap/tcp_store.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

using ::testing::HasSubstr;

TEST(TcpStore, SetGetAddCheck) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  auto b = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
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

TEST(TcpStore, GetTimesOutNamingTheKeyAndStaysUsable) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  ASSERT_TRUE(c.ok());
  auto v = (*c)->Get("never", std::chrono::milliseconds(50));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(v.status().message(), HasSubstr("'never'"));
  EXPECT_EQ(*(*c)->Add("n", 1), 1);
}

TEST(TcpStore, AllGatherNamesMissingRanks) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Set("p/2", "two").ok());
  auto all = AllGatherThroughStore(c->get(), "p", 0, 4, "zero", std::chrono::milliseconds(100));
  EXPECT_EQ(all.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(all.status().message(), HasSubstr("rank(s) 1,3 of 4 did not join"));
}

TEST(TcpStore, ConnectTimesOutWhenNobodyListens) {
  auto c = TcpStoreClient::Connect("127.0.0.1", 1, std::chrono::milliseconds(30));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(c.status().message(), HasSubstr("127.0.0.1:1 not reachable"));
}

TEST(TcpStore, SecretAdmitsOnlyClientsThatPresentIt) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  auto server = TcpStoreServer::Start("127.0.0.1", 0, secret);
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  auto good = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), secret);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE((*good)->Set("k", "v").ok());
  // Another secret: refused at connect, and the key is untouched.
  auto wrong = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5),
                                       "0123456789abcdef0123456789abcdeX");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(wrong.status().message(), HasSubstr("refused this client"));
  // No secret: its first request gets the connection closed, not an answer.
  auto none = TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(5), "");
  ASSERT_TRUE(none.ok());
  absl::Status set = (*none)->Set("k", "overwritten");
  EXPECT_EQ(set.code(), absl::StatusCode::kUnavailable) << set;
  EXPECT_EQ((*none)->Get("k", std::chrono::seconds(1)).status().code(), absl::StatusCode::kUnavailable);
  auto value = (*good)->Get("k", std::chrono::seconds(5));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
}

TEST(TcpStore, ServerWithoutSecretServesClientsWithOne) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, "");
  ASSERT_TRUE(server.ok());
  auto c = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), "s3cret-s3cret-s3cret");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Set("a", "b").ok());
  EXPECT_EQ(*(*c)->Get("a", std::chrono::seconds(5)), "b");
}

}  // namespace
}  // namespace athanor
