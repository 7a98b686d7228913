// rendezvous_rank: one rank of a job that only meets its peers through the
// bootstrap TCP store, as a training program's mains do: the rank env and
// the rendezvous options are read once, here at the edge
// (common/rank_env.h), and passed to the store. Rank 0 serves the store
// (on the agent's socket when ATHANOR_RENDEZVOUS_LISTEN_FD names one); every
// rank publishes "rank-<r>" and reads everyone's. Prints one line
//   rank R: rendezvous ok on port P: rank-0,rank-1,...
// and exits 0, or prints why and exits 1 (2 for a bad environment).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/bootstrap/tcp_store.h"
#include "common/rank_env.h"

int main() {
  using namespace athanor;
  absl::StatusOr<RankEnv> env = ParseRankEnv(ProcessEnv());
  absl::StatusOr<RendezvousEnv> rendezvous = ParseRendezvousEnv(ProcessEnv());
  if (!env.ok() || !rendezvous.ok()) {
    std::printf("bad environment: %s\n", (env.ok() ? rendezvous.status() : env.status()).ToString().c_str());
    return 2;
  }
  const std::string host = env->master_addr.empty() ? "127.0.0.1" : env->master_addr;
  std::unique_ptr<TcpStoreServer> server;
  if (env->rank == 0) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started = TcpStoreServer::Start(
        host, env->master_port, {.secret = rendezvous->secret, .listen_fd = rendezvous->listen_fd});
    if (!started.ok()) {
      std::printf("rank 0: %s\n", started.status().ToString().c_str());
      return 1;
    }
    server = std::move(*started);
  }
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect(host, env->master_port, std::chrono::seconds(30), rendezvous->secret);
  absl::StatusOr<std::vector<std::string>> all =
      client.ok() ? AllGatherThroughStore(client->get(), "hello", env->rank, env->world_size,
                                          absl::StrCat("rank-", env->rank), std::chrono::seconds(30))
                  : absl::StatusOr<std::vector<std::string>>(client.status());
  if (!all.ok()) {
    std::printf("rank %d: %s\n", env->rank, all.status().ToString().c_str());
    return 1;
  }
  std::printf("rank %d: rendezvous ok on port %d: %s\n", env->rank, env->master_port,
              absl::StrJoin(*all, ",").c_str());
  std::fflush(stdout);
  if (server != nullptr) server->Drain(std::chrono::seconds(10));  // the others may still read
  return 0;
}
