#include "collectives/ucx/socket_links.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "collectives/bootstrap/tcp_store.h"
#include "collectives/ucx/hier_exchange.h"
#include "collectives/ucx/topology.h"

namespace athanor {
namespace ucx_internal {
namespace {

using std::chrono::seconds;

// Waits (bounded: a lost message fails the test instead of hanging it) until
// `counter` reaches zero or `links` failed.
bool Await(const std::atomic<int>& counter, const SocketLinks& links) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (counter.load(std::memory_order_acquire) > 0 && !links.failed()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return counter.load(std::memory_order_acquire) == 0;
}

// Three ranks over loopback: 0 is linked to 1 and 2; 1 and 2 are not linked.
struct Trio {
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::unique_ptr<TcpStoreClient>> stores;
  std::vector<std::unique_ptr<SocketLinks>> links;

  void Start() {
    auto s = TcpStoreServer::Start("127.0.0.1", 0, {});
    ASSERT_TRUE(s.ok()) << s.status();
    server = *std::move(s);
    const std::vector<std::vector<int>> peers = {{1, 2}, {0}, {0}};
    stores.resize(3);
    links.resize(3);
    std::vector<absl::Status> status(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        auto c = TcpStoreClient::Connect("127.0.0.1", server->port(), seconds(10), "");
        if (!c.ok()) {
          status[r] = c.status();
          return;
        }
        stores[r] = *std::move(c);
        auto l = SocketLinks::Create(stores[r].get(), "links", r, 3, peers[r], "127.0.0.1",
                                     server->port(), seconds(10));
        if (!l.ok()) {
          status[r] = l.status();
          return;
        }
        links[r] = *std::move(l);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      ASSERT_NE(links[r], nullptr) << "rank " << r << " found no address on loopback";
    }
  }
};

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) & 0xFF);
  return v;
}

TEST(SocketLinks, MessagesMeetTheirReceivesInAnyOrder) {
  Trio trio;
  ASSERT_NO_FATAL_FAILURE(trio.Start());
  const std::vector<char> big = Pattern(3 << 20, 1), small = Pattern(100, 2), other = Pattern(5000, 3);
  std::atomic<int> sent{3};
  trio.links[0]->Send(1, /*tag=*/11, big.data(), big.size(), &sent);
  trio.links[0]->Send(1, /*tag=*/12, small.data(), small.size(), &sent);
  trio.links[0]->Send(2, /*tag=*/13, other.data(), other.size(), &sent);
  // Rank 1 asks for the later message first: the earlier one is held.
  std::vector<char> got_small(small.size()), got_big(big.size()), got_other(other.size());
  std::atomic<int> small_done{1}, big_done{1}, other_done{1};
  trio.links[1]->Recv(0, 12, got_small.data(), got_small.size(), &small_done);
  ASSERT_TRUE(Await(small_done, *trio.links[1])) << trio.links[1]->status();
  trio.links[1]->Recv(0, 11, got_big.data(), got_big.size(), &big_done);
  trio.links[2]->Recv(0, 13, got_other.data(), got_other.size(), &other_done);
  ASSERT_TRUE(Await(big_done, *trio.links[1])) << trio.links[1]->status();
  ASSERT_TRUE(Await(other_done, *trio.links[2])) << trio.links[2]->status();
  ASSERT_TRUE(Await(sent, *trio.links[0])) << trio.links[0]->status();
  EXPECT_EQ(got_small, small);
  EXPECT_EQ(got_big, big);
  EXPECT_EQ(got_other, other);
  // And back the other way, with a zero-length message.
  std::atomic<int> back_sent{2}, back_done{2};
  std::vector<char> reply = Pattern(70000, 4), got_reply(reply.size());
  trio.links[1]->Send(0, 21, reply.data(), reply.size(), &back_sent);
  trio.links[1]->Send(0, 22, nullptr, 0, &back_sent);
  trio.links[0]->Recv(1, 22, nullptr, 0, &back_done);
  trio.links[0]->Recv(1, 21, got_reply.data(), got_reply.size(), &back_done);
  ASSERT_TRUE(Await(back_done, *trio.links[0])) << trio.links[0]->status();
  ASSERT_TRUE(Await(back_sent, *trio.links[1])) << trio.links[1]->status();
  EXPECT_EQ(got_reply, reply);
  EXPECT_FALSE(trio.links[0]->failed());
}

TEST(SocketLinks, ALengthMismatchFailsNamingThePeer) {
  Trio trio;
  ASSERT_NO_FATAL_FAILURE(trio.Start());
  const std::vector<char> msg = Pattern(100, 5);
  std::atomic<int> sent{1}, done{1};
  trio.links[0]->Send(1, 7, msg.data(), msg.size(), &sent);
  std::vector<char> got(50);
  trio.links[1]->Recv(0, 7, got.data(), got.size(), &done);
  EXPECT_FALSE(Await(done, *trio.links[1]));
  ASSERT_TRUE(trio.links[1]->failed());
  EXPECT_EQ(trio.links[1]->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(trio.links[1]->status().message().find("peer rank 0"), std::string::npos)
      << trio.links[1]->status();
  EXPECT_NE(trio.links[1]->status().message().find("sent 100 B with tag 7 where 50 B were expected"),
            std::string::npos)
      << trio.links[1]->status();
}

TEST(SocketLinks, APeerThatGoesAwayIsNamed) {
  Trio trio;
  ASSERT_NO_FATAL_FAILURE(trio.Start());
  std::vector<char> got(10);
  std::atomic<int> done{1};
  trio.links[0]->Recv(2, 9, got.data(), got.size(), &done);
  trio.links[2].reset();  // closes its sockets, as a dead process's kernel does
  EXPECT_FALSE(Await(done, *trio.links[0]));
  ASSERT_TRUE(trio.links[0]->failed());
  EXPECT_EQ(trio.links[0]->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(trio.links[0]->status().message().find("peer rank 2 failed"), std::string::npos)
      << trio.links[0]->status();
  // Stop lets go of the buffers; later posts never complete.
  trio.links[0]->Stop();
  EXPECT_TRUE(trio.links[0]->stopped());
}

TEST(SocketLinks, AnUnlinkedPeerIsAnError) {
  Trio trio;
  ASSERT_NO_FATAL_FAILURE(trio.Start());
  std::atomic<int> sent{1};
  char byte = 1;
  trio.links[1]->Send(2, 1, &byte, 1, &sent);
  ASSERT_TRUE(trio.links[1]->failed());
  EXPECT_NE(trio.links[1]->status().message().find("no connection to rank 2"), std::string::npos);
}

TEST(HierExchange, LinkPeersAreEveryBlocksOwnersOnTheOtherHosts) {
  // 3 + 1: the lone rank owns every block and is linked to all three.
  Topology t = MakeTopology({"a", "a", "b", "a"});
  EXPECT_EQ(HierExchange::LinkPeers(t, 0), std::vector<int>({2}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 1), std::vector<int>({2}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 3), std::vector<int>({2}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 2), std::vector<int>({0, 1, 3}));
  // 1 + 1 + 2.
  t = MakeTopology({"a", "b", "c", "c"});
  EXPECT_EQ(HierExchange::LinkPeers(t, 0), std::vector<int>({1, 2, 3}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 1), std::vector<int>({0, 2, 3}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 2), std::vector<int>({0, 1}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 3), std::vector<int>({0, 1}));
  // 2 + 2, hosts interleaved.
  t = MakeTopology({"a", "b", "a", "b"});
  EXPECT_EQ(HierExchange::LinkPeers(t, 0), std::vector<int>({1}));
  EXPECT_EQ(HierExchange::LinkPeers(t, 2), std::vector<int>({3}));
}

}  // namespace
}  // namespace ucx_internal
}  // namespace athanor
