#include "bench/scheduler/observer_ab.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/core/cluster_state.h"
#include "coordinator/observability/metrics_registry.h"
#include "coordinator/observability/metrics_view.h"
#include "coordinator/observability/telemetry_store.h"

namespace athanor::bench {
namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

bool RunObserverAb(int nodes, int pending, int passes) {
  FakeClock clock;
  coord::StateOptions options;
  options.schedule_inline = false;
  coord::ClusterState state(options, &clock);
  for (int i = 0; i < nodes; ++i) {
    coord::NodeRecord n;
    n.name = absl::StrCat("node-", i);
    n.host = n.name;
    n.agent_address = "127.0.0.1:1";
    n.inventory.gpus = 8;
    if (!state.agents().Register(n, {}).ok()) return false;
  }
  auto submit = [&](int gpus, const std::string& tenant) {
    coord::JobSpec s;
    s.nodes = 1;
    s.gpus_per_node = gpus;
    s.tenant = tenant;
    s.command = {"train"};
    return state.SubmitJob(s).ok();
  };
  for (int i = 0; i < nodes * 2; ++i) {
    if (!submit(4, absl::StrCat("tenant-", i % 8))) return false;  // fills every GPU
  }
  state.Schedule();
  for (int i = 0; i < pending; ++i) {
    if (!submit(1 + i % 8, absl::StrCat("tenant-", i % 8))) return false;  // waits
  }
  state.TakeChanges();
  coord::TelemetryStore telemetry;
  coord::CoordinatorMetrics metrics(&telemetry);  // the coordinator's: view every 500 ms
  std::vector<double> off, on, worst;
  using Steady = std::chrono::steady_clock;
  // Rounds of one block per mode, so that each mode sees the machine's
  // load of the moment as the others do; within a block, passes back to back.
  constexpr int kRounds = 5;
  const int block = std::max(1, passes / kRounds);
  for (int round = 0; round < kRounds; ++round) {
    for (int mode = 0; mode < 3; ++mode) {
      for (int i = 0; i < block; ++i) {
        clock.Advance(Millis(5));
        const auto t0 = Steady::now();
        state.Schedule();
        const auto t1 = Steady::now();
        if (mode == 1) metrics.AfterPass(state, t1 - t0);
        if (mode == 2) coord::BuildClusterView(state, telemetry, 0);  // a view every pass
        const double us = std::chrono::duration<double, std::micro>(Steady::now() - t0).count();
        (mode == 0 ? off : mode == 1 ? on : worst).push_back(us);
        state.TakeChanges();
      }
    }
  }
  std::vector<double> view_build;
  for (size_t i = 0; i < worst.size() && i < off.size(); ++i) view_build.push_back(worst[i] - off[i]);
  std::printf("# scheduling pass with metrics off / on, %d nodes x 8 GPUs (full), %d pending, %d passes each\n",
              nodes, pending, passes);
  std::printf("%-34s %10s %10s %10s\n", "", "median_us", "p99_us", "mean_us");
  std::printf("%-34s %10.1f %10.1f %10.1f\n", "off (baseline)", Percentile(off, 50), Percentile(off, 99), Mean(off));
  std::printf("%-34s %10.1f %10.1f %10.1f\n", "on (as the coordinator runs it)", Percentile(on, 50),
              Percentile(on, 99), Mean(on));
  std::printf("%-34s %10.1f %10.1f %10.1f\n", "a view built every pass", Percentile(worst, 50),
              Percentile(worst, 99), Mean(worst));
  std::printf("on/off median %.4f, mean %.4f; one view build ~%.1f us (worst-case median minus off)\n",
              Percentile(on, 50) / Percentile(off, 50), Mean(on) / Mean(off), Percentile(view_build, 50));
  return true;
}

}  // namespace athanor::bench
