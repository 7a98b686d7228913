#include "bench/allreduce/cross_host.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/allreduce/bench_util.h"
#include "common/rank_env.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace athanor {
namespace {

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "athanor-bench-allreduce";
}

// gloo_allreduce.py, which the build copies next to this binary.
std::string GlooScriptPath() {
  const std::string self = SelfPath();
  return self.substr(0, self.rfind('/') + 1) + "gloo_allreduce.py";
}

// Runs argv to completion; its output goes to `log`. True on exit 0.
bool Run(const std::vector<std::string>& argv, const std::string& log) {
  SubprocessOptions so;
  so.argv = argv;
  so.stdout_path = log;
  so.stderr_path = "=stdout";
  auto p = Subprocess::Start(so);
  return p.ok() && (*p)->Wait().exit_code == 0;
}

// The namespaces: one switch with a bridge, and one per host joined to it.
class NetnsHosts {
 public:
  NetnsHosts(int hosts, int mtu)
      : tag_(absl::StrCat("athb", getpid())), hosts_(hosts), mtu_(std::to_string(mtu)) {}
  ~NetnsHosts() {
    for (int i = 0; i < hosts_; ++i) Run({"ip", "netns", "del", Ns(i)}, "/dev/null");
    Run({"ip", "netns", "del", tag_ + "sw"}, "/dev/null");
  }
  bool SetUp(const std::string& log) {
    const std::string sw = tag_ + "sw";
    if (!Run({"ip", "netns", "add", sw}, log) ||
        !Run({"ip", "-n", sw, "link", "add", "br0", "type", "bridge"}, log) ||
        !Run({"ip", "-n", sw, "link", "set", "br0", "mtu", mtu_, "up"}, log)) {
      return false;
    }
    for (int i = 0; i < hosts_; ++i) {
      const std::string h = absl::StrCat(tag_, "h", i), p = absl::StrCat(tag_, "p", i);
      if (!Run({"ip", "netns", "add", Ns(i)}, log) ||
          !Run({"ip", "link", "add", h, "type", "veth", "peer", "name", p}, log) ||
          !Run({"ip", "link", "set", h, "netns", Ns(i)}, log) ||
          !Run({"ip", "link", "set", p, "netns", sw}, log) ||
          !Run({"ip", "-n", sw, "link", "set", p, "master", "br0"}, log) ||
          !Run({"ip", "-n", sw, "link", "set", p, "mtu", mtu_, "up"}, log) ||
          !Run({"ip", "-n", Ns(i), "addr", "add", Addr(i) + "/24", "dev", h}, log) ||
          !Run({"ip", "-n", Ns(i), "link", "set", h, "mtu", mtu_, "up"}, log) ||
          !Run({"ip", "-n", Ns(i), "link", "set", "lo", "up"}, log)) {
        return false;
      }
    }
    return true;
  }
  std::string Ns(int i) const { return absl::StrCat(tag_, "n", i); }
  std::string Device(int i) const { return absl::StrCat(tag_, "h", i); }
  static std::string Addr(int i) { return absl::StrCat("10.79.0.", i + 1); }
  // argv that runs `cmd` on host i with its own hostname.
  std::vector<std::string> OnHost(int i, const std::vector<std::string>& cmd) const {
    std::vector<std::string> argv = {"ip", "netns", "exec", Ns(i), "unshare", "--uts", "sh", "-c",
                                     "hostname \"$0\" && exec \"$@\"", absl::StrCat("host-", i)};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return argv;
  }

 private:
  const std::string tag_;
  const int hosts_;
  const std::string mtu_;
};

struct Row {
  double time_us = 0, busbw = 0, memcpy = 0;
  int64_t wrong = 0;
};
using Table = std::map<size_t, Row>;  // by size

// Starts every rank (argv from make(rank, host)) with the env contract and
// waits for all; reads rank 0's JSON rows. Empty when a rank failed.
Table RunRanks(const NetnsHosts& net, const std::vector<int>& host_of, int port,
               const std::map<std::string, std::string>& extra_env,
               const std::vector<std::string>& cmd, const std::string& json,
               const std::string& log_prefix) {
  const int world = static_cast<int>(host_of.size());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  std::map<int, int> local_count;
  for (int h : host_of) ++local_count[h];
  std::map<int, int> seen;
  for (int r = 0; r < world; ++r) {
    RankEnv env;
    env.rank = r, env.world_size = world;
    env.local_rank = seen[host_of[r]]++, env.local_world_size = local_count[host_of[r]];
    env.master_addr = NetnsHosts::Addr(0), env.master_port = port;
    SubprocessOptions so;
    so.argv = net.OnHost(host_of[r], cmd);
    so.env = env.ToEnvironment();
    for (const auto& [k, v] : extra_env) so.env[k] = v;
    so.env["GLOO_SOCKET_IFNAME"] = net.Device(host_of[r]);
    so.stdout_path = absl::StrCat(log_prefix, "-rank", r, ".log");
    so.stderr_path = "=stdout";
    auto p = Subprocess::Start(so);
    if (!p.ok()) {
      fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return {};
    }
    ranks.push_back(*std::move(p));
  }
  bool ok = true;
  for (auto& p : ranks) ok &= p->Wait().exit_code == 0;
  Table t;
  if (!ok) return t;
  std::ifstream in(json);
  nlohmann::json rows = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!rows.is_array()) return t;
  for (const auto& row : rows) {
    Row r;
    r.time_us = row.value("time_us", 0.0);
    r.busbw = row.value("busbw_gbps", 0.0);
    r.memcpy = row.value("memcpy_gbps", 0.0);
    r.wrong = row.value("wrong", int64_t{0});
    t[row.value("size_bytes", size_t{0})] = r;
  }
  return t;
}

double MedianOf(const std::vector<Table>& runs, size_t size, double Row::*field) {
  std::vector<double> v;
  for (const Table& t : runs) {
    auto it = t.find(size);
    if (it != t.end()) v.push_back(it->second.*field);
  }
  return v.empty() ? 0 : Median(v);
}

}  // namespace

int RunCrossHost(const CrossHostOptions& o) {
  std::vector<int> host_of;
  int hosts = 0;
  for (absl::string_view part : absl::StrSplit(o.layout, '+')) {
    int k = 0;
    if (!absl::SimpleAtoi(part, &k) || k < 1 || k > 64) {
      fprintf(stderr, "--hosts: bad layout '%s' (want e.g. 2+2, 3+1, 1+1+2)\n", o.layout.c_str());
      return 2;
    }
    for (int i = 0; i < k; ++i) host_of.push_back(hosts);
    ++hosts;
  }
  if (hosts < 2) {
    fprintf(stderr, "--hosts: '%s' has one host; the layout needs two or more\n", o.layout.c_str());
    return 2;
  }
  if (geteuid() != 0) {
    fprintf(stderr, "--hosts needs root (network namespaces)\n");
    return 2;
  }
  char dir_template[] = "/tmp/athanor-bench-hosts-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string dir = dir_template;
  NetnsHosts net(hosts, o.mtu);
  if (!net.SetUp(dir + "/netns.log")) {
    fprintf(stderr, "could not set up the namespaces (see %s/netns.log)\n", dir.c_str());
    return 1;
  }
  const bool have_torch =
      Run({"/usr/bin/python3", "-c", "import torch.distributed as d; assert d.is_gloo_available()"},
          dir + "/torch-probe.log");
  const std::string gloo_script = GlooScriptPath();
  std::vector<std::string> sizes = {"--min-bytes", std::to_string(o.min_bytes), "--max-bytes",
                                    std::to_string(o.max_bytes), "--iters", std::to_string(o.iters),
                                    "--batches", std::to_string(o.batches), "--warmup",
                                    std::to_string(o.warmup)};
  std::vector<Table> flat, hier, gloo;
  int port = 29700;
  for (int run = 0; run < o.runs; ++run) {
    for (int algo = 0; algo < 3; ++algo) {
      if (algo == 2 && !have_torch) continue;
      const std::string json = absl::StrCat(dir, "/run", run, "-algo", algo, ".json");
      std::vector<std::string> cmd;
      std::map<std::string, std::string> env;
      if (algo < 2) {
        cmd = {SelfPath(), "--backend", "ucx", "--baseline", "none", "--json", json,
               "--log-level", "debug"};
        if (o.check) cmd.push_back("--check");
        env.emplace("ATHANOR_UCX_HIERARCHICAL", std::string(1, algo == 0 ? '0' : '1'));
        // The namespace hosts share this machine's cores with the kernel's
        // network stack: waiters nap between polls rather than spin (both
        // ucx columns alike; an ATHANOR_UCX_WAIT_NAP_US already set wins).
        const char* nap = std::getenv("ATHANOR_UCX_WAIT_NAP_US");
        env.emplace("ATHANOR_UCX_WAIT_NAP_US", nap != nullptr ? nap : "200");
      } else {
        cmd = {"/usr/bin/python3", gloo_script, "--json", json};
      }
      cmd.insert(cmd.end(), sizes.begin(), sizes.end());
      Table t = RunRanks(net, host_of, port++, env, cmd, json,
                         absl::StrCat(dir, "/run", run, "-algo", algo));
      if (t.empty()) {
        fprintf(stderr, "run %d: %s failed; logs in %s\n", run,
                algo == 0 ? "flat ring" : algo == 1 ? "hierarchical" : "gloo", dir.c_str());
        return 1;
      }
      (algo == 0 ? flat : algo == 1 ? hier : gloo).push_back(std::move(t));
    }
  }
  const int world = static_cast<int>(host_of.size());
  printf("# athanor-bench-allreduce --hosts %s: %d ranks on %d namespace hosts (veth + bridge, "
         "MTU %d), f32 sum, medians of %d runs (each: medians of %d x %d calls), memcpy %.2f GB/s\n",
         o.layout.c_str(), world, hosts, o.mtu, o.runs, o.batches, o.iters,
         MedianOf(flat, flat[0].begin()->first, &Row::memcpy));
  printf("# busbw = algbw * 2(n-1)/n, GB = 1e9; hier/flat and hier/gloo: time ratios per run, then their median%s\n",
         have_torch ? "" : "; gloo: n/a (Debian's python3-torch is not installed)");
  printf("%10s %10s %8s %10s %8s %10s %8s  %-22s %-22s %s\n", "size(B)", "flat(us)", "busbw",
         "hier(us)", "busbw", "gloo(us)", "busbw", "hier/flat", "hier/gloo", "#wrong");
  nlohmann::json out = nlohmann::json::array();
  int rc = 0;
  for (const auto& [size, unused] : flat[0]) {
    std::vector<double> vs_flat, vs_gloo;
    int64_t wrong = 0;
    for (int run = 0; run < o.runs; ++run) {
      const Row& h = hier[run][size];
      vs_flat.push_back(flat[run][size].time_us / h.time_us);
      if (have_torch) vs_gloo.push_back(gloo[run][size].time_us / h.time_us);
      wrong += flat[run][size].wrong + h.wrong + (have_torch ? gloo[run][size].wrong : 0);
    }
    auto list = [](const std::vector<double>& v) {
      std::vector<std::string> s;
      for (double x : v) s.push_back(absl::StrFormat("%.2f", x));
      return v.empty() ? std::string("n/a") : absl::StrCat(absl::StrJoin(s, ","), " =", absl::StrFormat("%.2f", Median(v)));
    };
    printf("%10zu %10.1f %8.3f %10.1f %8.3f %10s %8s  %-22s %-22s %lld\n", size,
           MedianOf(flat, size, &Row::time_us), MedianOf(flat, size, &Row::busbw),
           MedianOf(hier, size, &Row::time_us), MedianOf(hier, size, &Row::busbw),
           have_torch ? absl::StrFormat("%.1f", MedianOf(gloo, size, &Row::time_us)).c_str() : "n/a",
           have_torch ? absl::StrFormat("%.3f", MedianOf(gloo, size, &Row::busbw)).c_str() : "n/a",
           list(vs_flat).c_str(), list(vs_gloo).c_str(), static_cast<long long>(wrong));
    out.push_back({{"size_bytes", size}, {"layout", o.layout}, {"mtu", o.mtu}, {"runs", o.runs},
                   {"flat_time_us", MedianOf(flat, size, &Row::time_us)},
                   {"flat_busbw_gbps", MedianOf(flat, size, &Row::busbw)},
                   {"hier_time_us", MedianOf(hier, size, &Row::time_us)},
                   {"hier_busbw_gbps", MedianOf(hier, size, &Row::busbw)},
                   {"hier_vs_flat", Median(vs_flat)}, {"wrong", wrong}});
    if (have_torch) {
      out.back()["gloo_time_us"] = MedianOf(gloo, size, &Row::time_us);
      out.back()["gloo_busbw_gbps"] = MedianOf(gloo, size, &Row::busbw);
      out.back()["hier_vs_gloo"] = Median(vs_gloo);
    }
    if (wrong != 0) rc = 3;
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(1) << "\n";
  // What each size class ran, and where the hierarchical time went (rank 0's
  // debug log of the first run of each).
  for (int algo = 0; algo < 2; ++algo) {
    std::ifstream log(absl::StrCat(dir, "/run0-algo", algo, "-rank0.log"));
    for (std::string line; std::getline(log, line);) {
      const size_t layout = line.find("ucx: ranks on ");
      if (layout != std::string::npos) {
        printf("# %s: %s\n", algo == 0 ? "flat" : "hier", line.substr(layout + 5).c_str());
        continue;
      }
      const size_t at = line.find("ucx: rank 0: ");
      if (at == std::string::npos) continue;
      if (line.find(" all-reduces of ") == std::string::npos &&
          line.find(" hierarchical all-reduces took ") == std::string::npos) {
        continue;
      }
      printf("# %s: %s\n", algo == 0 ? "flat" : "hier", line.substr(at + 13).c_str());
    }
  }
  std::string rm = absl::StrCat("rm -rf '", dir, "'");
  if (rc == 0) Run({"sh", "-c", rm}, "/dev/null");
  return rc;
}

}  // namespace athanor
