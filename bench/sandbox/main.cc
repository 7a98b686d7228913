// athanor-bench-sandbox: what the sandbox adds to starting a rank.
//
//   athanor-bench-sandbox [--iterations N] [--json FILE]     (as root)
//
// Times, from Subprocess::Start to the exit of a rank that runs /bin/true:
//   plain       fork/exec as an unsandboxed agent does (the baseline);
//   rank        a rank joining its attempt's existing sandbox (every rank
//               after the first on a node): helper, PID namespace join,
//               cgroup placement, mount namespace, pivot, uid drop, exec;
//   first rank  the same plus making the attempt's box (cgroup with limits,
//               PID namespace holder, /dev/shm folder);
//   teardown    ending a box after its last rank (holder killed and awaited,
//               cgroup and folder removed).
// Prints median and p90 in ms and each median's ratio to the baseline.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "worker/agent/sandbox.h"

namespace athanor::agent {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Stats {
  double median, p90;
};
Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

double RunOnce(const SubprocessOptions& options) {
  auto start = Clock::now();
  auto p = Subprocess::Start(options);
  if (!p.ok()) {
    std::cerr << "start: " << p.status() << "\n";
    exit(1);
  }
  ExitInfo e = (*p)->Wait();
  if (e.exit_code != 0) {
    std::cerr << "the rank failed: " << e.ToString() << "\n";
    exit(1);
  }
  return Ms(Clock::now() - start);
}

int Main(int argc, char** argv) {
  int iterations = 50;
  std::string json;
  constexpr char kUsage[] =
      "usage: athanor-bench-sandbox [--iterations N] [--json FILE]\n"
      "As root: times starting a rank in the agent's sandbox against a plain fork/exec.\n";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  if (argc % 2 == 0) {
    std::cerr << kUsage;
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--iterations" && absl::SimpleAtoi(argv[i + 1], &iterations) && iterations > 0) continue;
    if (flag == "--json") {
      json = argv[i + 1];
      continue;
    }
    std::cerr << kUsage;
    return 2;
  }
  char tmpl[] = "/tmp/athanor-bench-sandbox.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  SandboxOptions o;
  o.exec_path = std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/athanor-sandbox-exec";
  o.work_dir = dir;
  o.node_name = "bench";
  o.node_memory_mb = 1024;
  o.node_cpus = 1;
  o.node_gpus = 1;
  auto sandbox = Sandbox::Create(o);
  if (!sandbox.ok()) {
    std::cerr << "cannot sandbox here: " << sandbox.status() << "\n";
    return 1;
  }
  SubprocessOptions base;
  base.argv = {"/bin/true"};
  base.stdout_path = dir + "/out.log";
  base.stderr_path = "=stdout";

  std::vector<double> plain, rank, first, teardown;
  // One rank of attempt "warm" stays registered so its box lives throughout.
  RankTarget keep;
  keep.key = {"warm", 1, 0};
  SubprocessOptions unused = base;
  if (!(*sandbox)->Wrap(keep, JobShare{}, "", &unused).ok()) return 1;
  for (int i = 0; i < iterations + 3; ++i) {  // the first 3 warm up
    plain.push_back(RunOnce(base));
    RankTarget t;
    t.key = {"warm", 1, i + 1};
    SubprocessOptions s = base;
    auto start = Clock::now();
    if (!(*sandbox)->Wrap(t, JobShare{}, "", &s).ok()) return 1;
    double wrap = Ms(Clock::now() - start);
    rank.push_back(wrap + RunOnce(s));
    (*sandbox)->Ended(t.key, 0);
    RankTarget f;
    f.key = {absl::StrCat("job", i), 1, 0};
    SubprocessOptions fs = base;
    start = Clock::now();
    if (!(*sandbox)->Wrap(f, JobShare{}, "", &fs).ok()) return 1;
    wrap = Ms(Clock::now() - start);
    first.push_back(wrap + RunOnce(fs));
    start = Clock::now();
    (*sandbox)->Ended(f.key, 0);
    teardown.push_back(Ms(Clock::now() - start));
  }
  for (auto* v : {&plain, &rank, &first, &teardown}) v->erase(v->begin(), v->begin() + 3);
  (*sandbox)->Ended(keep.key, 0);
  Stats base_stats = Summarise(plain);
  std::printf("%-12s %10s %10s %8s   (%d iterations)\n", "case", "median_ms", "p90_ms", "ratio", iterations);
  std::string out = "{";
  for (auto [name, v] : {std::pair{"plain", &plain}, {"rank", &rank}, {"first rank", &first}, {"teardown", &teardown}}) {
    Stats s = Summarise(*v);
    std::printf("%-12s %10.2f %10.2f %8.2f\n", name, s.median, s.p90, s.median / base_stats.median);
    absl::StrAppend(&out, out.size() > 1 ? ", " : "", "\"", name, "\": {\"median_ms\": ", s.median,
                    ", \"p90_ms\": ", s.p90, "}");
  }
  if (!json.empty()) std::ofstream(json) << out << "}\n";
  sandbox->reset();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace athanor::agent

int main(int argc, char** argv) { return athanor::agent::Main(argc, argv); }
