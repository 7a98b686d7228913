// athanor-bench-train: runs athanor-train for 1 and 2 ranks (athanor-run,
// ucx backend), each precision, overlap on and off, all in this one run, and
// reports medians over the measured steps: tokens/s, step time, time blocked
// on gradient all-reduce and its share of the step, gradient bytes per step.
// The 1-rank run of each precision is the baseline for scaling. A check
// confirms overlap on/off train identically (same losses, bitwise).
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/options.h"
#include "common/subprocess.h"
#include "worker/agent/telemetry_hub.h"

namespace athanor {
namespace {

struct Config {
  int ranks;
  std::string precision;
  bool overlap;
};

struct Result {
  Config config;
  double tokens_per_s = 0, step_ms = 0, wait_ms = 0, wait_share = 0;
  double grad_bytes = 0;
  std::vector<double> losses;
  bool ok = false;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string p(buf, n > 0 ? n : 0);
  return p.substr(0, p.rfind('/'));
}

Result RunOne(const Config& c, const std::string& bin, const std::vector<std::string>& model,
              int steps, int warmup, const std::string& telemetry_socket = "") {
  Result r;
  r.config = c;
  SubprocessOptions o;
  if (!telemetry_socket.empty()) o.env["ATHANOR_TELEMETRY_SOCKET"] = telemetry_socket;
  if (c.ranks > 1) o.argv = {bin + "/athanor-run", "--nproc", std::to_string(c.ranks), "--"};
  std::vector<std::string> train = {bin + "/athanor-train", "--steps", std::to_string(steps),
                                    "--precision", c.precision};
  o.argv.insert(o.argv.end(), train.begin(), train.end());
  o.argv.insert(o.argv.end(), model.begin(), model.end());
  if (!c.overlap) o.argv.push_back("--no-overlap");
  o.capture_stdout = true;
  o.stderr_path = "/dev/null";
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    std::cerr << p.status() << std::endl;
    return r;
  }
  const std::string out = (*p)->ReadAllStdout();
  if ((*p)->Wait().exit_code != 0) return r;
  std::vector<double> tps, step, wait, share, bytes;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    absl::ConsumePrefix(&line, "[0] ");
    nlohmann::json j = nlohmann::json::parse(std::string(line), nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;
    r.losses.push_back(j["loss"].get<double>());
    if (j["step"].get<int>() < warmup) continue;
    tps.push_back(j["tokens_per_s"]);
    step.push_back(j["step_ms"]);
    wait.push_back(j["comm_wait_ms"]);
    share.push_back(j["comm_wait_ms"].get<double>() / j["step_ms"].get<double>());
    bytes.push_back(j["grad_bytes"]);
  }
  r.tokens_per_s = Median(tps);
  r.step_ms = Median(step);
  r.wait_ms = Median(wait);
  r.wait_share = Median(share);
  r.grad_bytes = Median(bytes);
  r.ok = static_cast<int>(r.losses.size()) == steps;
  return r;
}

// Telemetry on against off: `pairs` runs of each (2 ranks, fp32, overlap),
// interleaved off/on so both see the same machine. "On" is the agent's real
// TelemetryHub receiving every rank's per-step datagram. Prints the medians
// of each run's median tokens/s and their ratio; false when a run failed or
// the hub missed rank 0's last step.
bool TelemetryAb(const std::string& bin, const std::vector<std::string>& model, int steps, int warmup,
                 int pairs) {
  agent::TelemetryHub hub(std::filesystem::temp_directory_path().string() + "/athanor-bench-train." +
                          std::to_string(getpid()));
  std::vector<double> off, on;
  bool ok = true;
  for (int i = 0; i < pairs; ++i) {
    Result a = RunOne({2, "fp32", true}, bin, model, steps, warmup);
    absl::StatusOr<std::string> socket = hub.SocketFor("bench", i + 1);
    if (!socket.ok()) {
      std::cerr << socket.status() << std::endl;
      return false;
    }
    Result b = RunOne({2, "fp32", true}, bin, model, steps, warmup, *socket);
    auto latest = hub.Latest();
    auto it = latest.find({"bench", i + 1});
    const bool received = it != latest.end() && it->second.step == steps - 1;
    ok = ok && a.ok && b.ok && received;
    off.push_back(a.tokens_per_s);
    on.push_back(b.tokens_per_s);
    std::cout << absl::StrFormat("pair %d: tokens/s off %.0f on %.0f (hub got rank 0's last step: %s)\n", i + 1,
                                 a.tokens_per_s, b.tokens_per_s, received ? "yes" : "NO");
  }
  const double m_off = Median(off), m_on = Median(on);
  std::cout << absl::StrFormat("telemetry off: %.0f tokens/s, on: %.0f tokens/s (median of %d runs each); "
                               "on/off = %.4f\n",
                               m_off, m_on, pairs, m_off > 0 ? m_on / m_off : 0.0);
  std::filesystem::remove_all(std::filesystem::temp_directory_path().string() + "/athanor-bench-train." +
                              std::to_string(getpid()));
  return ok;
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) {
  using namespace athanor;
  int steps = 30, warmup = 5, hidden = 1024, layers = 2, context = 16, embed = 32, mb = 32;
  int max_ranks = 2, telemetry_ab = 0;
  std::string bin, json_path;
  po::options_description desc("athanor-bench-train options");
  desc.add_options()("steps", po::value(&steps)->default_value(30), "steps per configuration")(
      "warmup", po::value(&warmup)->default_value(5), "leading steps left out of the medians")(
      "hidden", po::value(&hidden)->default_value(1024), "model hidden width")(
      "layers", po::value(&layers)->default_value(2), "hidden layers")(
      "context", po::value(&context)->default_value(16), "context bytes")(
      "embed", po::value(&embed)->default_value(32), "embedding width")(
      "micro-batch", po::value(&mb)->default_value(32), "micro-batch per rank")(
      "max-ranks", po::value(&max_ranks)->default_value(2), "largest rank count (1..N)")(
      "bin-dir", po::value(&bin),
      "where athanor-train/athanor-run are (default: beside this binary)")(
      "json", po::value(&json_path), "also write the results as JSON here")(
      "telemetry-ab", po::value(&telemetry_ab)->default_value(0),
      "instead: N interleaved pairs of 2-rank fp32 runs with the telemetry socket off and on");
  ParsedCommandLine parsed;
  absl::Status s = ParseOptions(argc, argv, desc, "usage: athanor-bench-train [options]", &parsed);
  if (!s.ok()) {
    std::cerr << s.message() << std::endl;
    return 2;
  }
  if (parsed.help) return 0;
  if (bin.empty()) bin = SelfDir();
  const std::vector<std::string> model = {"--hidden",      std::to_string(hidden),
                                          "--layers",      std::to_string(layers),
                                          "--context",     std::to_string(context),
                                          "--embed",       std::to_string(embed),
                                          "--micro-batch", std::to_string(mb),
                                          "--optimizer",   "sgd",
                                          "--lr",          "0.02",
                                          "--data",        "synthetic:2000000"};
  const long long params = 256LL * hidden + 256 + 256LL * embed +
                           (1LL * hidden * context * embed + hidden) +
                           (layers - 1LL) * (1LL * hidden * hidden + hidden);
  std::cout << absl::StrFormat(
      "# athanor-bench-train: %lld parameters (%.1f MB of f32 gradients), micro-batch %d per "
      "rank, %d steps (medians over the last %d)\n",
      params, params * 4 / 1e6, mb, steps, steps - warmup);
  if (telemetry_ab > 0) return TelemetryAb(bin, model, steps, warmup, telemetry_ab) ? 0 : 1;
  std::cout << absl::StrFormat("%6s %6s %8s %12s %9s %10s %10s %14s %9s\n", "ranks", "prec",
                               "overlap", "tokens/s", "step_ms", "wait_ms", "wait_share",
                               "grad_B/step", "speedup");
  nlohmann::json all = nlohmann::json::array();
  bool all_ok = true;
  for (const std::string prec : {"fp32", "bf16", "fp16"}) {
    double baseline = 0;
    for (int ranks = 1; ranks <= max_ranks; ++ranks) {
      std::vector<double> overlap_losses;
      for (bool overlap : {true, false}) {
        if (ranks == 1 && !overlap) continue;  // nothing to overlap
        Result r = RunOne({ranks, prec, overlap}, bin, model, steps, warmup);
        if (!r.ok) {
          std::cout << "FAILED: " << ranks << " ranks " << prec << std::endl;
          all_ok = false;
          continue;
        }
        if (ranks == 1) baseline = r.tokens_per_s;
        std::string check;
        if (overlap) {
          overlap_losses = r.losses;
        } else {
          const bool same = r.losses == overlap_losses;
          all_ok = all_ok && same;
          check = same ? "" : "  (losses differ from overlap run!)";
        }
        std::cout << absl::StrFormat("%6d %6s %8s %12.0f %9.2f %10.2f %9.1f%% %14.0f %8.2fx%s\n",
                                     ranks, prec, overlap ? "on" : "off", r.tokens_per_s, r.step_ms,
                                     r.wait_ms, 100 * r.wait_share, r.grad_bytes,
                                     baseline > 0 ? r.tokens_per_s / baseline : 0.0, check);
        all.push_back({{"ranks", ranks},
                       {"precision", prec},
                       {"overlap", overlap},
                       {"tokens_per_s", r.tokens_per_s},
                       {"step_ms", r.step_ms},
                       {"comm_wait_ms", r.wait_ms},
                       {"comm_wait_share", r.wait_share},
                       {"grad_bytes_per_step", r.grad_bytes}});
      }
    }
  }
  std::cout << "# grad_B/step: bytes each rank hands to all-reduce per step (a ring sends "
               "2(n-1)/n of that); check overlap on/off losses identical: "
            << (all_ok ? "ok" : "FAILED") << std::endl;
  if (!json_path.empty()) std::ofstream(json_path) << all.dump(2) << "\n";
  return all_ok ? 0 : 1;
}
