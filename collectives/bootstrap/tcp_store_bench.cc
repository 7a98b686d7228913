// The cost of a rendezvous through the TCP store: N clients (threads) connect
// to a fresh store at once, each adds 1 to a counter and disconnects; the
// time from the first connect to the last client's Add. Run with and without
// a secret to see what the handshake (store_auth.h) costs. Checks that the
// counter reads N. Uses only the store's public API, so the same file builds
// against older versions of tcp_store for a baseline.
//   tcp_store_bench [--clients 1,8,64] [--runs 15] [--no-secret] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "collectives/bootstrap/tcp_store.h"

namespace {

using Clock = std::chrono::steady_clock;

// One rendezvous of `n` clients; milliseconds, or -1 on any error.
double Once(int n, const std::string& secret) {
  auto server = athanor::TcpStoreServer::Start("127.0.0.1", 0, {.secret = secret});
  if (!server.ok()) {
    std::fprintf(stderr, "start: %s\n", server.status().ToString().c_str());
    return -1;
  }
  const int port = (*server)->port();
  std::vector<std::thread> ranks;
  std::vector<int> ok(n, 0);
  const Clock::time_point start = Clock::now();
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      auto c = athanor::TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(10), secret);
      ok[r] = c.ok() && (*c)->Add("joined", 1).ok();
    });
  }
  for (auto& t : ranks) t.join();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  auto check = athanor::TcpStoreClient::Connect("127.0.0.1", port, std::chrono::seconds(10), secret);
  auto joined = check.ok() ? (*check)->Add("joined", 0) : absl::StatusOr<int64_t>(check.status());
  if (std::count(ok.begin(), ok.end(), 1) != n || !joined.ok() || *joined != n) {
    std::fprintf(stderr, "check failed: %d of %d clients joined\n",
                 static_cast<int>(std::count(ok.begin(), ok.end(), 1)), n);
    return -1;
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1, 8, 64};
  int runs = 15;
  bool json = false;
  std::string secret = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--clients" && i + 1 < argc) {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(argv[++i], ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(s, &v) || v < 1) return 2;
        sizes.push_back(v);
      }
    } else if (a == "--runs" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &runs) || runs < 1) return 2;
    } else if (a == "--no-secret") {
      secret.clear();
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: tcp_store_bench [--clients 1,8,64] [--runs 15] [--no-secret] [--json]\n");
      return 2;
    }
  }
  if (!json) std::printf("# secret: %s\n#%8s %6s %10s %10s %10s\n", secret.empty() ? "none" : "yes", "clients",
                         "runs", "min_ms", "median_ms", "max_ms");
  for (int n : sizes) {
    if (Once(n, secret) < 0) return 1;  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      double t = Once(n, secret);
      if (t < 0) return 1;
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
    if (json) {
      std::printf("{\"clients\":%d,\"runs\":%d,\"secret\":%s,\"min_ms\":%.3f,\"median_ms\":%.3f,\"max_ms\":%.3f}\n",
                  n, runs, secret.empty() ? "false" : "true", ms.front(), median, ms.back());
    } else {
      std::printf(" %8d %6d %10.3f %10.3f %10.3f\n", n, runs, ms.front(), median, ms.back());
    }
  }
  return 0;
}
